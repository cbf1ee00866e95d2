"""The data dictionary is generated from the warehouse's own comments, and is never stale."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from centsync.pipelines.cli.main import main
from centsync.pipelines.outputs.data_dictionary import fresh, render, undocumented

DICTIONARY = Path(__file__).resolve().parents[2] / "docs" / "data-dictionary.md"


def test_the_committed_data_dictionary_is_what_centsync_docs_generates() -> None:
    assert DICTIONARY.read_text("utf-8") == render(), (
        "docs/data-dictionary.md is stale: run `make docs` (or `centsync docs`) and commit it"
    )


def test_every_table_and_column_in_marts_recon_core_ops_has_a_comment() -> None:
    con = fresh()
    try:
        assert undocumented(con, ("marts", "recon", "core", "ops")) == []
        assert undocumented(con, ("raw", "history", "server")) == []
    finally:
        con.close()


def test_the_dictionary_lists_every_table_and_view_a_migration_creates() -> None:
    con = fresh()
    try:
        names = con.execute(
            "SELECT schema_name || '.' || table_name FROM duckdb_tables() "
            "UNION ALL SELECT schema_name || '.' || view_name FROM duckdb_views() WHERE NOT internal"
        ).fetchall()
    finally:
        con.close()
    text = render()
    assert len(names) > 40
    assert all(f"### {n}" in text for (n,) in names)
    assert "later issues" not in text.lower()


def test_centsync_docs_check_fails_on_a_stale_file_and_writing_fixes_it(tmp_path: Path) -> None:
    out = tmp_path / "data-dictionary.md"
    out.write_text("# an old dictionary\n")
    stale = CliRunner().invoke(main, ["docs", "--check", "--out", str(out)])
    assert stale.exit_code == 1 and "stale" in stale.output
    wrote = CliRunner().invoke(main, ["docs", "--out", str(out)])
    assert wrote.exit_code == 0 and out.read_text("utf-8") == render()
    assert CliRunner().invoke(main, ["docs", "--check", "--out", str(out)]).exit_code == 0
