"""The README's configuration table is what the config classes generate (`make docs`)."""

from runtime.docs import README, with_table


def test_readme_configuration_table_is_fresh() -> None:
    text = README.read_text()
    assert with_table(text) == text, "stale configuration table in README.md: run `make docs`"
