-- 010: the answers the API document leaves "not shown" (issue 42), as centsync read them: per
-- surface, documented (the contract's shape fitted), learned from the data (with the evidence),
-- pinned in the contract file, or unavailable (and what doing without costs). Re-checked on
-- every refresh; `centsync doctor` reads it.
CREATE TABLE ops.contract (
    surface VARCHAR PRIMARY KEY,
    state VARCHAR NOT NULL,
    mapping JSON,
    shape JSON,
    evidence VARCHAR,
    reason VARCHAR,
    learned_refresh BIGINT,
    checked_refresh BIGINT,
    changed_at TIMESTAMP
);
COMMENT ON TABLE ops.contract IS 'How centsync reads each answer the API document leaves "not shown" (one row per surface): the contract''s shape, a shape learned from the data, one pinned in the contract file (CENTSYNC_CONTRACT_FILE), or unavailable. Re-checked on every refresh; a changed shape is re-learned. See docs/api-contract.md.';
COMMENT ON COLUMN ops.contract.surface IS 'Method and path of the surface, e.g. ''GET /v1/transactions/summary''.';
COMMENT ON COLUMN ops.contract.state IS '''documented'' (the contract''s mapping fits the answer), ''learned'' (a mapping found from the data), ''pinned'' (set in the contract file) or ''unavailable'' (the answer could not be read; the refresh does without it).';
COMMENT ON COLUMN ops.contract.mapping IS 'Role -> JSON path in the answer, e.g. {"count": "totals.n"}; a leading - means the value is negated, [] every element of a list, [field=value] the element whose field is value, {type} the account type. NULL when unavailable.';
COMMENT ON COLUMN ops.contract.shape IS 'The last answer''s shape: key names, JSON types and nesting, never a value (what a bug report may carry).';
COMMENT ON COLUMN ops.contract.evidence IS 'Why the mapping is believed, in words: which known figure each field equals (the list''s total, the rows'' sums, the account balances, an IANA zone name).';
COMMENT ON COLUMN ops.contract.reason IS 'When unavailable: why the answer could not be read, and what the refresh does without it (and what that costs in requests). NULL otherwise.';
COMMENT ON COLUMN ops.contract.learned_refresh IS 'The number of the refresh that last set the mapping (learned, re-learned or read from the pin): its position in ops.refreshes by started_at, 1 for the first.';
COMMENT ON COLUMN ops.contract.checked_refresh IS 'The number of the last refresh that checked the mapping against an answer (as learned_refresh).';
COMMENT ON COLUMN ops.contract.changed_at IS 'When the state or the mapping last changed (UTC).';

-- The answers of those surfaces that could not be read, kept whole: nothing the service said
-- is lost, and a mapping pinned later can be checked against them. Not rejected rows (a
-- surface done without is not a refused record: it does not fail the refresh).
CREATE TABLE raw.unread_answers (
    refresh_id  VARCHAR NOT NULL,
    surface     VARCHAR NOT NULL,
    body        JSON,
    reason      VARCHAR NOT NULL,
    received_at TIMESTAMPTZ NOT NULL
);
COMMENT ON TABLE raw.unread_answers IS 'Answers of surfaces the API document leaves "not shown" that centsync could not read (ops.contract state unavailable), kept whole with why; one row per answer. They do not count as rejected rows.';
COMMENT ON COLUMN raw.unread_answers.refresh_id IS 'The refresh that received the answer.';
COMMENT ON COLUMN raw.unread_answers.surface IS 'Method and path, e.g. ''GET /v1/analytics/net-worth''.';
COMMENT ON COLUMN raw.unread_answers.body IS 'The answer''s body exactly as sent (JSON).';
COMMENT ON COLUMN raw.unread_answers.reason IS 'Why it could not be read, and what the refresh did without it.';
COMMENT ON COLUMN raw.unread_answers.received_at IS 'When it was landed (UTC).';

-- An answer learned in part lands what it says: the figures it does not give are NULL, and
-- reconciliation lists their checks as unavailable (never as agreeing).
ALTER TABLE server.transactions_summary ALTER COLUMN income DROP NOT NULL;
ALTER TABLE server.transactions_summary ALTER COLUMN expense DROP NOT NULL;
ALTER TABLE server.transactions_summary ALTER COLUMN transfer DROP NOT NULL;
ALTER TABLE server.transactions_summary ALTER COLUMN net DROP NOT NULL;
ALTER TABLE server.accounts_summary ALTER COLUMN assets DROP NOT NULL;
ALTER TABLE server.accounts_summary ALTER COLUMN liabilities DROP NOT NULL;
ALTER TABLE server.accounts_summary ALTER COLUMN net_worth DROP NOT NULL;
ALTER TABLE server.accounts_summary ALTER COLUMN count DROP NOT NULL;
ALTER TABLE server.net_worth ALTER COLUMN assets DROP NOT NULL;
ALTER TABLE server.net_worth ALTER COLUMN liabilities DROP NOT NULL;
ALTER TABLE server.spending ALTER COLUMN count DROP NOT NULL;
COMMENT ON COLUMN server.transactions_summary.income IS 'Sum of income amounts, in cents (positive); NULL when the service''s answer does not give it (ops.contract).';
COMMENT ON COLUMN server.transactions_summary.expense IS 'Sum of expense amounts, in cents (negative = money out; refunds count positive); NULL when the service''s answer does not give it.';
COMMENT ON COLUMN server.transactions_summary.transfer IS 'Sum of transfer amounts, in cents; NULL when the service''s answer does not give it.';
COMMENT ON COLUMN server.accounts_summary.assets IS 'Sum of the positive balances, in cents; NULL when the service''s answer does not give it (ops.contract).';
COMMENT ON COLUMN server.accounts_summary.liabilities IS 'Magnitude of the negative balances, in cents (a positive number); NULL when the answer does not give it.';
COMMENT ON COLUMN server.accounts_summary.net_worth IS 'assets - liabilities, in cents; NULL when the answer does not give it.';
COMMENT ON COLUMN server.accounts_summary.count IS 'Accounts counted; NULL when the answer does not give it.';
COMMENT ON COLUMN server.net_worth.assets IS 'Assets in cents; NULL when the service''s answer does not give it (ops.contract).';
COMMENT ON COLUMN server.net_worth.liabilities IS 'Liabilities in cents (a positive magnitude); NULL when the answer does not give it.';
COMMENT ON COLUMN server.spending.count IS 'Number of transactions; NULL when the service''s answer does not give it (ops.contract).';
