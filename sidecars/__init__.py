"""Local sidecar processes for the dev stack: a dev OIDC provider, a mock backend, an echo LLM.

Each sidecar is an app of `sidecars.web` (routes over the edge's httptools server, no web
framework) in its own package, run with `python -m sidecars.<name>`. The shared pieces (JSON
logging, the serve loop, JSON error rendering) live in `jsonlog` and `httpkit`; nothing here is
imported by the gateways or the control plane at run time.
"""
