"""What a plugin declares of itself, read by the configuration's writer (the Admin API checks a
configuration with it) and by its reader (the data plane's plugin class inherits it): its name,
priority, configuration schema and the checks a schema cannot express. One declaration per
plugin under `gateways/edge/model/plugins/`; the plugin itself (`gateways/edge/plugins/`) adds
the phases."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from gateways.edge.model.resources import MissingReference, Snapshot


class Declaration:
    """One plugin's declaration.

    Subclasses declare `name`, `priority`, `schema` (JSON Schema of the plugin's
    configuration, checked by the Admin API with a JSON Schema library), and for auth plugins
    `consumer_schema` (the configuration a consumer holds, e.g. key-auth's `key`) and
    `credential_field` (the field that must be unique across consumers). `check_conf` adds the
    checks a JSON Schema cannot express.
    """

    name: ClassVar[str]
    priority: ClassVar[int]
    schema: ClassVar[dict[str, Any]]
    consumer_schema: ClassVar[dict[str, Any] | None] = None
    credential_field: ClassVar[str | None] = None
    # An auth plugin's consumer secrets and how they are kept at rest (gateways/edge/model/
    # credentials.py): "digest" (looked up by keyed digest), "hashed" (scrypt), "sealed"
    # (encrypted with the platform keyring). The Admin API never shows them.
    secret_fields: ClassVar[Mapping[str, str]] = {}
    # For the README's plugin table when the phases are chosen by configuration.
    phases_doc: ClassVar[str | None] = None
    # Configuration fields that name another resource, and its kind (grpc-transcode's
    # `proto_id` → "protos"): the Admin API checks they exist and refuses to delete one in use.
    references: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def check_conf(cls, conf: Mapping[str, Any]) -> str | None:
        """What `schema` cannot express (a regex that does not compile, a bad `vars`
        expression), as APISIX's `check_schema` words it, or None. `conf` has the schema's
        defaults; the Admin API refuses the configuration with this message (400) and the data
        plane rejects it, as for a schema error."""
        return None

    @classmethod
    def check_references(cls, conf: Mapping[str, Any], snapshot: Snapshot) -> str | None:
        """What `conf` needs of the resources it names, checked against `snapshot` (the
        configuration it is written into): raises `MissingReference` for a named resource that
        does not exist, returns the problem when one does not fit (a proto without the
        configured method), else None. The data plane would refuse the configuration too."""
        for name, kind in cls.references.items():
            if name in conf and str(conf[name]) not in snapshot.of(kind):
                raise MissingReference(kind, conf[name])
        return None

    @classmethod
    def check_resource(cls, kind: str, value: Mapping[str, Any]) -> str | None:
        """What this plugin requires of a resource of a kind it owns (grpc-transcode: a
        `protos` resource's content compiles), as the Admin API's message, or None."""
        return None
