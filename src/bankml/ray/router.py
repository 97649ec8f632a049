"""The prefix-affinity request router of bankml's Ray Serve replicas: a Ray Serve custom request router
(`ray.serve.request_router.RequestRouter`, configured on the replica deployment through
`RequestRouterConfig(request_router_class="bankml.ray.router:PrefixAffinityRouter")`), so Ray's own handle picks
the replica and Ray's own queue-length probes break ties; bankml adds no proxy of its own.

It runs where the deployment's handle lives (bankml.ray.serving.Ingress, in Ray's ingress replica). The ingress
passes each request's key (bankml.ray.affinity.Key) as the `affinity` keyword of the handle call;
`choose_replicas` answers ranks of replicas, most preferred first, and Ray takes, within the first rank that has
room (fewer than max_ongoing_requests), the replica with the shortest queue (ties: the first listed):

1. the replicas that received the longest prefix of this request's block chain (at least one block): the
   conversation's own replica, whose slots or host prompt cache hold its history;
2. the replicas that hold the requested model (their routing stats' `models`, or a request for it routed there),
   fewest conversations first (a new conversation goes where the fewest prompts compete for the slots);
3. every other replica, fewest conversations first.

What a replica received is remembered here (at most `max_blocks` block hashes a replica, least recently used
dropped first), forgotten when the replica leaves the set Ray routes to (died, drained, replaced) or when its
routing stats report another engine epoch (its engine was rebuilt: bankml.ray.serving.Replica.reconfigure).
"""

from __future__ import annotations

import logging
import weakref
from collections import OrderedDict

from ray.serve.request_router import PendingRequest, ReplicaID, RequestRouter, RunningReplica

log = logging.getLogger("bankml.ray")

_LIVE: "weakref.WeakSet[PrefixAffinityRouter]" = weakref.WeakSet()


def forget_all() -> None:
    """Every router of this process forgets what it routed (the ingress calls it when the replicas' engines are
    rebuilt: a new user_config)."""
    for r in list(_LIVE):
        r.forget()


class _Held:
    __slots__ = ("blocks", "firsts", "models", "epoch")

    def __init__(self):
        self.blocks: OrderedDict[str, None] = OrderedDict()
        self.firsts: OrderedDict[str, None] = OrderedDict()   # first blocks: one a conversation
        self.models: set[str] = set()
        self.epoch = None


class PrefixAffinityRouter(RequestRouter):

    def __init__(self, *args, **kwargs):
        # the state exists before Ray's base class may call update_replicas; initialize_state sets its limit
        self._max_blocks = 65536
        self._held: dict[ReplicaID, _Held] = {}
        self.decisions = {"prefix": 0, "new": 0}
        super().__init__(*args, **kwargs)

    def initialize_state(self, max_blocks: int = 65536, **kwargs):
        self._max_blocks = int(max_blocks)
        self._held: dict[ReplicaID, _Held] = {}
        self.decisions = {"prefix": 0, "new": 0}
        _LIVE.add(self)

    # --- what was routed where

    def forget(self) -> None:
        self._held = {}

    def _entry(self, rid: ReplicaID) -> _Held:
        e = self._held.get(rid)
        if e is None:
            e = self._held[rid] = _Held()
        return e

    def _sync(self, replicas: list[RunningReplica]) -> None:
        live = {r.replica_id for r in replicas}
        for rid in [rid for rid in self._held if rid not in live]:
            del self._held[rid]
        for r in replicas:
            stats = r.routing_stats or {}
            e = self._held.get(r.replica_id)
            if e is None or "epoch" not in stats:
                continue
            if e.epoch is None:
                e.epoch = stats["epoch"]
            elif e.epoch != stats["epoch"]:        # the engine was rebuilt: its caches are empty
                self._held[r.replica_id] = _Held()
                self._held[r.replica_id].epoch = stats["epoch"]

    @staticmethod
    def _key(pending_request: PendingRequest | None):
        if pending_request is None:
            return None
        return pending_request.kwargs.get("affinity")

    def _holds_model(self, r: RunningReplica, model: str) -> bool:
        if not model:
            return True
        stats = r.routing_stats or {}
        e = self._held.get(r.replica_id)
        return model in stats.get("models", ()) or (e is not None and model in e.models)

    def _conversations(self, r: RunningReplica) -> int:
        e = self._held.get(r.replica_id)
        return 0 if e is None else len(e.firsts)

    async def choose_replicas(self, candidate_replicas: list[RunningReplica],
                              pending_request: PendingRequest | None = None) -> list[list[RunningReplica]]:
        self._sync(candidate_replicas)
        key = self._key(pending_request)
        blocks = tuple(key.blocks) if key is not None else ()
        model = key.model if key is not None else ""
        best, depth = [], 0
        if blocks:
            for r in candidate_replicas:
                e = self._held.get(r.replica_id)
                if e is None:
                    continue
                d = next((i + 1 for i in range(len(blocks) - 1, -1, -1) if blocks[i] in e.blocks), 0)
                if d > depth:
                    best, depth = [r], d
                elif d == depth and d > 0:
                    best.append(r)
        rest = [r for r in candidate_replicas if r not in best]
        order = sorted(rest, key=lambda r: (self._conversations(r), str(r.replica_id.unique_id)))
        holders = [r for r in order if self._holds_model(r, model)]
        others = [r for r in order if not self._holds_model(r, model)]
        return [rank for rank in (best, holders, others) if rank]

    def on_request_routed(self, pending_request: PendingRequest, replica_id: ReplicaID, result) -> None:
        key = self._key(pending_request)
        if key is None:
            return
        e = self._entry(replica_id)
        if key.blocks:
            # a request whose first block this replica already received: a follow-up that found its prefix
            self.decisions["prefix" if key.blocks[0] in e.blocks else "new"] += 1
            for b in key.blocks:
                e.blocks[b] = None
                e.blocks.move_to_end(b)
            e.firsts[key.blocks[0]] = None
            e.firsts.move_to_end(key.blocks[0])
            while len(e.blocks) > self._max_blocks:
                e.blocks.popitem(last=False)
            while len(e.firsts) > self._max_blocks:
                e.firsts.popitem(last=False)
        if key.model:
            e.models.add(key.model)

    def on_replica_actor_died(self, replica_id: ReplicaID):
        super().on_replica_actor_died(replica_id)
        self._held.pop(replica_id, None)

    def update_replicas(self, replicas: list[RunningReplica]):
        super().update_replicas(replicas)
        self._sync(replicas)
