"""The `strata` command: the composition root, the one package that imports every service.

`main` (the command line: up, status, env, logs, stop, config, version), `launcher/` (the
local stack `strata up` runs), `docs` (`make docs`: the README's generated tables and the
OpenAPI documents). Nothing imports cli: runtime is the bottom layer, the services sit on it,
and cli composes them (tests/unit/test_boundaries.py holds that).
"""
