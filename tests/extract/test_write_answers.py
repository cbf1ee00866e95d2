"""A write's transaction is found in its answer whatever the wrapper, verified against what was
sent; the real sandbox's writes (its contract dialect here, every dialect in
tests/extract/test_dialects.py) are confirmed once and never posted twice."""

from __future__ import annotations

from typing import Any

import orjson

from centsync.extract._models import Transaction, find_transaction

from .conftest import AsgiEnv, run

TX = {
    "id": "8d0c1b5e-3f1e-4c59-9d0e-2b1c6f7a9e01",
    "account_id": "2f6b7c1d-1111-4a2b-8c3d-4e5f60718293",
    "concept": "Cash: market",
    "amount": -1250,
    "booked_at": "2025-05-02",
    "type": "expense",
    "category_id": None,
    "expense_goal_id": None,
}
SENT = {k: TX[k] for k in ("account_id", "amount", "concept", "booked_at")}


def test_bare_and_wrapped_answers_give_the_same_transaction() -> None:
    shapes: list[Any] = [
        TX,
        {"data": TX},
        {"transaction": TX, "meta": {"request": "x"}},
        {"result": [TX]},
        [TX],
        {"ok": True, "created": {**TX, "extra": {"nested": 1}}},
    ]
    for doc in shapes:
        text = orjson.dumps(doc).decode()
        t = Transaction.from_answer(doc, text, SENT, status=201)
        assert t is not None and t.id == TX["id"] and t.amount == -1250, doc
        assert t.answer == text and orjson.loads(t.raw)["id"] == TX["id"]


def test_an_object_that_disagrees_with_what_was_sent_is_not_taken() -> None:
    other = {**TX, "amount": -1251}
    assert find_transaction({"data": other}, SENT) is None
    assert find_transaction({"data": {"id": TX["id"]}}, SENT) is None  # not the documented fields
    assert find_transaction({"a": {"b": TX}}, SENT) is None  # two wrappers deep
    assert find_transaction(None, SENT) is None
    assert find_transaction({"data": [TX, TX]}, SENT) is None  # a list is not one transaction
    # ids agree in any case
    assert find_transaction({"data": TX}, {"id": TX["id"].upper()}) is not None


def test_the_contract_s_create_edit_and_assign_are_found_in_the_answer(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        state = await asgi_env.admin().state()
        account = next(a["id"] for a in state["accounts"] if a["type"] == "depository")
        async with asgi_env.client() as c:
            created = await c.create_transaction(
                account_id=account,
                amount=-990,
                concept="Answer shape",
                booked_at="2025-05-03",
                idempotency_key="answers:1",
            )
            edited = await c.update_transaction(created.id, concept="Answer shape 2")
            requests = c.stats.snapshot()
        assert created.status == 201 and created.found == "in the answer"
        assert edited.status == 200 and edited.concept == "Answer shape 2"
        assert "GET /v1/transactions" not in requests  # nothing read back: the answer said it

    run(go())
