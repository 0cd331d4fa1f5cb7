"""Telemetry dependencies stay importable together (xds-protos also ships opentelemetry/proto)."""


def test_otlp_exporter_imports_beside_xds_protos() -> None:
    import xds.type.v3.typed_struct_pb2  # noqa: F401 - the package whose files collide
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.proto.common.v1 import common_pb2

    assert hasattr(common_pb2, "InstrumentationScope")
    assert OTLPSpanExporter is not None
