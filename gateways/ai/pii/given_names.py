"""Gazetteers of person names that are not drawn from any evaluation data.

- Given names: Jörg Michael's `nam_dict.txt` (the list shipped in the `gender-guesser`
  package): ~48,000 given names with their frequency in 54 countries and regions, from the
  Nordic and Slavic countries to India, China, Japan, Korea, Vietnam, Turkey and Africa.
- Family names of the cultures that write them first (Chinese, Vietnamese, Korean), where a
  small set covers most people: the commonest surnames as published by the countries'
  statistics offices and summarised in reference works (the Hundred Family Surnames' top
  entries in pinyin; the fourteen Vietnamese family names borne by ~90% of Vietnamese).
"""

from __future__ import annotations

import unicodedata
from functools import cache
from importlib import resources


def _words(text: str) -> list[str]:
    return text.split()


# English words that are also given names: alone they are not evidence of a person.
COMMON_WORDS = frozenset(
    _words(
        """
a an and art bill bob will may june april august grace hope joy faith rose lily iris
mark max pat sunny summer autumn dawn eve ray rob sue chase hunter page angel star paris
london jordan florence victoria georgia virginia carolina sydney santa rio roy major
maria del la le de da do el van von san sun son long young king lane ford will nick jack
frank bishop baker cook carter mason parker bay dale glen brook cliff cruz sharp bond
penny ruby amber jasmine holly ivy heather olive violet crystal china india asia africa
regan sol luz paz mercedes esperanza dolores pilar rosario general private minister
director manager doctor member customer client user monday sunday friday team group
office street road mobile phone email note about from with your our their this that here
there my is can how what who why when where which please send compare meeting notes dear
hi hello thanks thank yes no not all has have had is are was were does did do will would
can could should shall might must ask tell invite i you he she it we they me him her us them
any new old good best big little north south east west
saint st mont port lake mount city town village park river hill
"""
    )
)

VIETNAMESE_FAMILY = frozenset(
    _words(
        """
nguyễn trần lê phạm hoàng huỳnh phan vũ võ đặng bùi đỗ hồ ngô dương lý đinh đoàn trương
lâm mai cao tạ lương
"""
    )
)
CHINESE_FAMILY = frozenset(
    _words(
        """
wang li zhang liu chen yang huang zhao wu zhou xu sun ma zhu hu guo he gao lin luo zheng
liang xie song tang han feng deng cao peng zeng xiao tian dong yuan pan cai jiang yu du
ye cheng wei su lu ding ren shen yao jin fan fu zhong tan jia xia qian qin gu hou meng
xue yan lei bai long duan hao kong shao shi mao wan gong qiu jiao kim lee park choi jung
kang cho yoon jang lim
"""
    )
)


def fold(word: str) -> str:
    """Lower case without diacritics ("Éléonore" -> "eleonore")."""
    decomposed = unicodedata.normalize("NFKD", word.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


@cache
def given_names() -> frozenset[str]:
    names: set[str] = set()
    data = resources.files("gender_guesser").joinpath("data/nam_dict.txt")
    with data.open(encoding="utf-8") as lines:
        for line in lines:
            if line[:1] in "#=" or len(line) < 4:
                continue
            name = line.split()[1].lower()
            for joined in {name.replace("+", j) for j in ("", " ", "-")}:
                names.update(part for part in joined.split())
                names.add(fold(joined))
    return frozenset(n for n in names if len(n) > 1) - COMMON_WORDS


def is_given_name(word: str) -> bool:
    lowered = word.lower()
    if lowered in COMMON_WORDS:
        return False
    known = given_names()
    return (
        lowered in known
        or fold(word) in known
        or all(part.lower() in known or fold(part) in known for part in word.split("-") if part)
    )


def is_family_first(word: str) -> bool:
    return word.lower() in VIETNAMESE_FAMILY or word.lower() in CHINESE_FAMILY
