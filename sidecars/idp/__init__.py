"""A small dev OpenID Connect provider with Keycloak-shaped paths, tokens and admin API.

It issues RS256/ES256 JWTs for human users (password grant, or the browser login of the
authorization-code flow with PKCE and its refresh tokens) and service users (client
credentials), serves discovery and a JWKS, registers public clients (RFC 7591), and lets the
control plane provision tenants at run time. In Kubernetes, Keycloak replaces it; only the
IDP_* URLs change. See sidecars/README.md.
"""
