"""Merchant display names: the name a person reads for a merchant key, pure Polars.

The merchant key (`spending.merchant_key`: the concept trimmed, lower-cased, whitespace collapsed)
is the service's grouping and stays the key of every mart. Its display name is ours:

1. cleaned: store numbers and references dropped (a word with a digit, `#1182`), what follows a
   `*` dropped (`uber *trip`, `deliveroo *order`), web suffixes dropped (`netflix.com` ->
   `netflix`, `apple.com/bill` -> `apple`), company forms dropped (`spotify ab`);
2. grouped: a cleaned name that starts with another cleaned name of the same ledger takes the
   shorter one (`mercadona valencia` -> `mercadona` when `mercadona` is seen too), and the
   built-in aliases below name the feeds' abbreviations (`amzn mktp` -> Amazon);
3. renamed: the rules file's `[merchants]` table (transform/rules.py) maps a merchant key, or a
   cleaned name, to the name the person chose; it wins over 1 and 2;
4. in the feed's own mixed-case spelling where it has one (`iCloud Storage`, `IKEA Valencia`),
   else title-cased (`LIDL`, `burger king` -> `Lidl`, `Burger King`).
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

# the feeds' abbreviations of well-known merchants (cleaned name -> display name)
ALIASES: dict[str, str] = {
    "amzn": "Amazon",
    "amzn mktp": "Amazon",
    "amazon": "Amazon",
    "amazon mktplace": "Amazon",
    "amazon prime": "Amazon Prime",
    "paypal": "PayPal",
}
_COMPANY_FORMS = r"\b(ab|sa|sl|slu|ltd|inc|gmbh|bv|llc|plc|co)\b"


def cleaned(key: pl.Expr) -> pl.Expr:
    """A merchant key without store numbers, references, web suffixes and company forms."""
    return (
        key.str.replace(r"\*.*$", "")  # `uber *trip`: the reference after the star
        .str.replace_all(r"\.(com|es|co\.uk|net|org|de|fr|it)\b(/\S*)?", "")
        .str.replace_all(r"\S*\d\S*", "")  # words with a digit: store numbers, references
        .str.replace_all(r"[#*]", " ")
        .str.replace_all(_COMPANY_FORMS, "")
        .str.replace_all(r"\s+", " ")
        .str.strip_chars(" -.,/")
        .str.replace(r"(\S) (es|fr|uk|de|it|pt|nl|us)$", "$1")  # a trailing country code
    )


def _title(name: pl.Expr) -> pl.Expr:
    return name.str.to_titlecase()


def _mixed(text: pl.Expr) -> pl.Expr:
    """Written in mixed case (`iCloud Storage`, not `LIDL` nor `burger king`): a spelling a
    person chose, kept as the display name's case."""
    return (text != text.str.to_lowercase()) & (text != text.str.to_uppercase())


def display_names(keys: pl.LazyFrame, renames: Mapping[str, str] | None = None) -> pl.LazyFrame:
    """`merchant` (the key) -> `merchant_name`, for every distinct key of `keys` (with the
    `concept`s it comes from, when given: a mixed-case spelling keeps its case).

    A key whose cleaned form is empty (a concept made of references only) keeps the key itself.
    """
    renames = dict(renames or {})
    if "concept" not in keys.collect_schema():
        keys = keys.with_columns(concept=pl.lit(None, pl.String))
    cased = cleaned(pl.col("concept").str.replace_all(r"\s+", " ").str.strip_chars(" "))
    base = (
        keys.select("merchant", "concept")
        .unique()
        .group_by("merchant")
        .agg(cased=cased.filter(_mixed(cased)).sort().first())
        .with_columns(clean=cleaned(pl.col("merchant")))
        .with_columns(
            clean=pl.when(pl.col("clean") == "").then(pl.col("merchant")).otherwise("clean")
        )
    )
    # the group's own spelling: a mixed-case spelling of a key whose cleaned name is the group
    spelling = (
        base.filter(pl.col("cased").str.to_lowercase() == pl.col("clean"))
        .group_by(pl.col("clean").alias("group"))
        .agg(spelling=pl.col("cased").sort().first())
    )
    # grouping: the shortest other cleaned name that is a whole-word prefix of this one
    names = base.select(pl.col("clean").alias("short")).unique()
    prefixed = (
        base.join(names, how="cross")
        .filter(
            (pl.col("short").str.len_chars() < pl.col("clean").str.len_chars())
            & pl.col("clean").str.starts_with(pl.col("short") + pl.lit(" "))
        )
        .group_by("merchant")
        .agg(pl.col("short").sort_by(pl.col("short").str.len_chars()).first())
    )
    alias = pl.DataFrame(
        {"group": list(ALIASES), "alias": list(ALIASES.values())},
        schema={"group": pl.String, "alias": pl.String},
    ).lazy()
    chosen = pl.DataFrame(
        {"merchant": list(renames), "renamed": list(renames.values())},
        schema={"merchant": pl.String, "renamed": pl.String},
    ).lazy()
    by_clean = chosen.rename({"merchant": "group", "renamed": "renamed_group"})
    named = pl.coalesce("renamed", "renamed_group", "alias", "spelling", _title(pl.col("group")))
    return (
        base.join(prefixed, "merchant", "left")
        .with_columns(group=pl.coalesce("short", "clean"))
        .join(alias, "group", "left")
        .join(chosen, "merchant", "left")
        .join(by_clean, "group", "left")
        .join(spelling, "group", "left")
        .select("merchant", merchant_name=named)
    )
