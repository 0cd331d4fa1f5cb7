"""spaCy without its command line: `import spacy` imports `spacy.cli` (for `spacy.info`), and
with it typer, rich, weasel, jinja2, pygments, click and httpx, about 10 MB of the AI
gateway's RSS that running a pipeline never uses. `spacy.cli` is a stand-in while spaCy is
imported (`runtime/stand_ins.py`): `spacy.info()` and `import spacy.cli` still work, and
import it then."""

from __future__ import annotations

from runtime.stand_ins import standing_in

with standing_in({"spacy.cli": {}, "spacy.cli.info": {"info": "call"}}):
    import spacy

__all__ = ["spacy"]
