"""bankml.ray.router.PrefixAffinityRouter's ranks (Ray Serve's RequestRouter API), on stand-in replicas: no Ray
cluster, only the class. The ranks are what Ray's handle tries in order, the shortest queue first within one."""

from __future__ import annotations

import asyncio
import json
import types

import pytest

pytest.importorskip("ray.serve", reason="Ray Serve is not installed (pip install 'bankml[ray]')")

from ray.serve._private.common import DeploymentHandleSource, DeploymentID, ReplicaID  # noqa: E402

from bankml.ray import affinity  # noqa: E402
from bankml.ray.router import PrefixAffinityRouter, forget_all  # noqa: E402

DEP = DeploymentID(name="BankmlReplica", app_name="bankml")


def _replica(uid: str, models=(), epoch=0):
    return types.SimpleNamespace(replica_id=ReplicaID(unique_id=uid, deployment_id=DEP),
                                 routing_stats={"models": list(models), "epoch": epoch})


def _request(messages, model=""):
    body = {"messages": messages, **({"model": model} if model else {})}
    return types.SimpleNamespace(kwargs={"affinity": affinity.of("POST", "/v1/chat/completions",
                                                                 json.dumps(body).encode())})


def _ranks(router, replicas, request):
    ranks = asyncio.run(router.choose_replicas(replicas, request))
    return [[r.replica_id.unique_id for r in rank] for rank in ranks]


@pytest.fixture
def router():
    r = PrefixAffinityRouter(deployment_id=DEP, handle_source=DeploymentHandleSource.UNKNOWN)
    r.initialize_state()
    return r


def _route(router, replica, request):
    router.on_request_routed(request, replica.replica_id, None)


TURN1 = [{"role": "user", "content": "What is the capital of France?"}]
TURN2 = TURN1 + [{"role": "assistant", "content": "Paris."}, {"role": "user", "content": "And of Italy?"}]
OTHER = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a river."}]


def test_a_follow_up_goes_where_its_prefix_is(router):
    a, b = _replica("a"), _replica("b")
    assert _ranks(router, [a, b], _request(TURN1)) == [["a", "b"]]       # nothing known: fewest conversations
    _route(router, b, _request(TURN1))
    assert _ranks(router, [a, b], _request(TURN2)) == [["b"], ["a"]]
    # a new conversation: the replica with fewer conversations first
    assert _ranks(router, [a, b], _request(OTHER)) == [["a", "b"]]
    _route(router, a, _request(OTHER))
    assert _ranks(router, [a, b], _request(OTHER + TURN1)) == [["a"], ["b"]]
    assert router.decisions == {"prefix": 0, "new": 2}
    _route(router, b, _request(TURN2))
    assert router.decisions == {"prefix": 1, "new": 2}


def test_the_replica_holding_the_model_is_preferred(router):
    a, b = _replica("a", ["smollm2"]), _replica("b", ["gemma3", "gemma3:270m"])
    assert _ranks(router, [a, b], _request(TURN1, "gemma3:270m")) == [["b"], ["a"]]
    assert _ranks(router, [a, b], _request(TURN1, "smollm2")) == [["a"], ["b"]]
    # a model routed to a replica counts as held there before its stats say so
    _route(router, a, _request(OTHER, "qwen3"))
    assert _ranks(router, [a, b], _request(TURN1, "qwen3")) == [["a"], ["b"]]


def test_what_a_replica_held_is_forgotten(router):
    a, b = _replica("a"), _replica("b")
    _route(router, a, _request(TURN1))
    assert _ranks(router, [a, b], _request(TURN2))[0] == ["a"]
    # its engine rebuilt (another epoch in its routing stats): its caches are empty
    assert _ranks(router, [_replica("a", epoch=1), b], _request(TURN2)) == [["a", "b"]]     # one rank: no prefix
    _route(router, a, _request(TURN1))
    router.on_replica_actor_died(a.replica_id)
    assert _ranks(router, [b], _request(TURN2)) == [["b"]]
    _route(router, b, _request(TURN1))
    forget_all()
    assert _ranks(router, [a, b], _request(TURN2)) == [["a", "b"]]


def test_the_config_builder_makes_the_application():
    # `serve run bankml.ray.serving:app_builder flags=... replicas=...` and serveConfigV2's args: strings
    from ray.serve.config import RequestRouterConfig

    from bankml.ray import serving
    app = serving.app_builder({"flags": "-m /models/m.gguf -np 2 -t 2", "replicas": "3", "replica_cpus": "2"})
    replica = app._bound_deployment.init_args[0]._bound_deployment
    assert replica.name == "BankmlReplica" and replica.num_replicas == 3
    assert replica.user_config == {"argv": ["-m", "/models/m.gguf", "-np", "2", "-t", "2"], "epoch": 0}
    assert replica.ray_actor_options["num_cpus"] == 2
    assert replica.max_ongoing_requests == 4
    router = replica._deployment_config.request_router_config
    assert isinstance(router, RequestRouterConfig)
    assert router.request_router_class == "bankml.ray.router:PrefixAffinityRouter"
