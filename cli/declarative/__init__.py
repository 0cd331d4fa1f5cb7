"""Strata as code: the platform's whole configuration as one YAML document.

format.py      the document: apiVersion/kind, its sections, its JSON Schema, YAML in/out
references.py  `${env:NAME}` / `${file:PATH}` secret references and their naming
stack.py       how the CLI finds a running stack (stack.json, secrets.json, env, flags)
client.py      the public APIs it reads and writes (control plane, edge admin, agent gw)
export.py      the running configuration → a document
validate.py    a document checked offline with the services' own schemas and validators
normalize.py   each resource as the platform would show it, by the services' validators
live.py        the running configuration read through the public APIs
plan.py        a document against the running configuration → the changes, in order
apply.py       the changes made through the public APIs
commands.py    `strata config export|validate|diff|apply` and their exit codes
"""
