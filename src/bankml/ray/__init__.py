"""bankml on Ray Serve (`pip install 'bankml[ray]'`): replicas of bankml-serve behind Ray's HTTP proxy, routed by
prompt prefix (docs/scale.md).

- bankml.ray.affinity: a request's prefix key (no Ray needed)
- bankml.ray.router: PrefixAffinityRouter, Ray Serve's RequestRouter extension point
- bankml.ray.serving: the replica and ingress deployments, `application(argv, replicas)`
- bankml.ray.launch: `bankml-serve --ray [--replicas N]`

Importing bankml never imports Ray; only bankml.ray.router, .serving and .launch's main do.
"""
