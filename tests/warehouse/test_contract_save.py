"""ops.contract saved in one statement (issue 46): every surface's row upserted, `changed_at`
moved only for a row whose state or mapping changed, on a real warehouse file."""

from __future__ import annotations

import time

from centsync.warehouse import Warehouse


def _row(surface: str, state: str, mapping: dict[str, str] | None, checked: int) -> dict:
    return {
        "surface": surface,
        "state": state,
        "mapping": mapping,
        "shape": {"totals": {"n": "int"}},
        "evidence": "the list's total",
        "reason": None if mapping else "not readable",
        "learned_refresh": 1,
        "checked_refresh": checked,
    }


def _stored(wh: Warehouse) -> dict[str, tuple]:
    rows = wh.con.execute(
        "SELECT surface, state, mapping::VARCHAR, checked_refresh, changed_at FROM ops.contract"
    ).fetchall()
    return {r[0]: r[1:] for r in rows}


def test_many_rows_upserted_at_once(wh: Warehouse) -> None:
    wh.save_contract([])  # nothing to save: nothing written
    assert _stored(wh) == {}
    wh.save_contract(
        [
            _row("GET /a", "learned", {"count": "n"}, 1),
            _row("GET /b", "documented", {"count": "total"}, 1),
            _row("GET /c", "unavailable", None, 1),
        ]
    )
    first = _stored(wh)
    assert {s: r[:3] for s, r in first.items()} == {
        "GET /a": ("learned", '{"count":"n"}', 1),
        "GET /b": ("documented", '{"count":"total"}', 1),
        "GET /c": ("unavailable", None, 1),
    }
    time.sleep(0.01)
    wh.save_contract(
        [
            _row("GET /a", "learned", {"count": "n"}, 2),  # checked again, unchanged
            _row("GET /b", "learned", {"count": "n"}, 2),  # re-learned: changed
            _row("GET /d", "learned", {"net": "net"}, 2),  # new
        ]
    )
    second = _stored(wh)
    assert second["GET /a"][:3] == ("learned", '{"count":"n"}', 2)
    assert second["GET /a"][3] == first["GET /a"][3]  # its changed_at kept
    assert second["GET /b"][:3] == ("learned", '{"count":"n"}', 2)
    assert second["GET /b"][3] > first["GET /b"][3]
    assert second["GET /c"] == first["GET /c"]  # not in the batch: untouched
    assert second["GET /d"][:3] == ("learned", '{"net":"net"}', 2)
