"""The README's generated tables are what the code generates (`make docs`)."""

from cli.docs import README, with_table
from gateways.edge.model.resources import ENABLED_PLUGINS
from gateways.edge.plugins import REGISTRY


def test_readme_generated_tables_are_fresh() -> None:
    text = README.read_text()
    assert with_table(text) == text, "stale generated table in README.md: run `make docs`"


def test_every_enabled_plugin_is_built_and_describes_itself() -> None:
    assert sorted(REGISTRY) == sorted(ENABLED_PLUGINS)  # the spec's 27 and the 2 custom ones
    assert len(REGISTRY) == 29
    for name, plugin in REGISTRY.items():
        assert "__doc__" in vars(plugin) and plugin.__doc__, f"{name} has no class docstring"
