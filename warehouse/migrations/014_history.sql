-- 014: the warehouse remembers (issue 45). core.transactions stays the service's current
-- state; history.transaction_versions keeps the versions a refresh replaced, as validity
-- intervals (SCD2). A row is written here only when a refresh changes it: the first sync
-- writes nothing (a row never changed has one version, its core row, shown as 'first seen' by
-- history.transaction_timeline), so a household's history grows with what the service changes,
-- not with its ledger. warehouse/history.py writes it; docs/analysts.md shows the queries.
CREATE TABLE history.refresh_clock (
    refresh_id VARCHAR PRIMARY KEY,
    seen_at    TIMESTAMPTZ NOT NULL
);
COMMENT ON TABLE history.refresh_clock IS 'The service''s clock at each refresh that changed a transaction (its net worth''s as_of): the time the versions that refresh saw are valid from. A refresh missing here (a first sync) is timed by ops.refreshes.started_at.';
COMMENT ON COLUMN history.refresh_clock.refresh_id IS 'The refresh (ops.refreshes.refresh_id).';
COMMENT ON COLUMN history.refresh_clock.seen_at IS 'The service''s "now" when that refresh read (UTC); the local clock when the service gave none.';

CREATE TABLE history.transaction_versions (
    id                 UUID NOT NULL,
    valid_from_refresh VARCHAR NOT NULL,
    valid_to_refresh   VARCHAR,
    valid_from         TIMESTAMPTZ NOT NULL,
    valid_to           TIMESTAMPTZ,
    kind               VARCHAR NOT NULL,
    changed_fields     VARCHAR[],
    origin             VARCHAR NOT NULL,
    account_id         UUID,
    concept            VARCHAR,
    amount             BIGINT,
    booked_at          DATE,
    month              DATE,
    type               VARCHAR,
    category_id        UUID,
    expense_goal_id    UUID,
    created_at         TIMESTAMPTZ,
    updated_at         TIMESTAMPTZ
);
COMMENT ON TABLE history.transaction_versions IS 'Every version of a transaction that a refresh changed, as a validity interval (SCD2): the version it replaced (if never written here), and the new one (added, changed, deleted, came back). A row never changed has no row here: its only version is its core.transactions row (history.transaction_timeline shows both). Written in the landing transaction, so it is exactly what the refreshes saw.';
COMMENT ON COLUMN history.transaction_versions.id IS 'The transaction (core.transactions.id).';
COMMENT ON COLUMN history.transaction_versions.valid_from_refresh IS 'The refresh that first saw this version (ops.refreshes.refresh_id).';
COMMENT ON COLUMN history.transaction_versions.valid_to_refresh IS 'The refresh that saw it replaced (changed, deleted or back again); NULL while it is the current version.';
COMMENT ON COLUMN history.transaction_versions.valid_from IS 'When this version was first seen: the service''s clock at valid_from_refresh (history.refresh_clock), UTC.';
COMMENT ON COLUMN history.transaction_versions.valid_to IS 'When it was seen replaced (the service''s clock at valid_to_refresh); NULL while current. A version is valid in [valid_from, valid_to).';
COMMENT ON COLUMN history.transaction_versions.kind IS '''first seen'' (the version a refresh first read, written when it is replaced), ''added'' (new in a month already read), ''changed'', ''deleted'' (gone from the service: the row as it was, in no ledger from then on) or ''came back'' (sent again after a deletion).';
COMMENT ON COLUMN history.transaction_versions.changed_fields IS 'For ''changed'': the fields that differ from the version before (core.transactions column names; ''payload'' when only a field core does not keep changed, see raw.transactions). NULL for the other kinds.';
COMMENT ON COLUMN history.transaction_versions.origin IS 'Who made the change: ''service'' (the bank or the app), ''write-back'' (our own request in ops.outbox, confirmed by that refresh) or ''rule'' (our rules file, via the write-back).';
COMMENT ON COLUMN history.transaction_versions.account_id IS 'The version''s account (core.accounts.id).';
COMMENT ON COLUMN history.transaction_versions.concept IS 'The version''s concept, as the service sent it.';
COMMENT ON COLUMN history.transaction_versions.amount IS 'The version''s amount in integer cents; negative is money out.';
COMMENT ON COLUMN history.transaction_versions.booked_at IS 'The version''s date.';
COMMENT ON COLUMN history.transaction_versions.month IS 'First day of booked_at''s month.';
COMMENT ON COLUMN history.transaction_versions.type IS 'expense, income or transfer.';
COMMENT ON COLUMN history.transaction_versions.category_id IS 'The version''s category (NULL: uncategorised).';
COMMENT ON COLUMN history.transaction_versions.expense_goal_id IS 'The Expense goal the version was assigned to, if any.';
COMMENT ON COLUMN history.transaction_versions.created_at IS 'When the service created the transaction.';
COMMENT ON COLUMN history.transaction_versions.updated_at IS 'When the service last updated this version.';

-- Refreshes numbered as ops.contract numbers them (1 for the first, by started_at), with the
-- time their versions are valid from.
CREATE VIEW history.refreshes AS
SELECT r.refresh_id,
       row_number() OVER (ORDER BY r.started_at, r.refresh_id) AS refresh_no,
       coalesce(c.seen_at, r.started_at) AS seen_at,
       r.started_at, r.status, r.mode
FROM ops.refreshes r LEFT JOIN history.refresh_clock c USING (refresh_id);
COMMENT ON VIEW history.refreshes IS 'Every refresh with its number (1 for the first, by started_at: the numbers history.ledger_as_of_refresh takes) and the time its versions are valid from.';
COMMENT ON COLUMN history.refreshes.refresh_id IS 'The refresh (ops.refreshes.refresh_id).';
COMMENT ON COLUMN history.refreshes.refresh_no IS 'Its number: 1 for the first refresh, by started_at.';
COMMENT ON COLUMN history.refreshes.seen_at IS 'The service''s clock when it read (history.refresh_clock), else its started_at.';
COMMENT ON COLUMN history.refreshes.started_at IS 'When it started (local clock, UTC).';
COMMENT ON COLUMN history.refreshes.status IS 'running, succeeded, failed or interrupted (ops.refreshes.status).';
COMMENT ON COLUMN history.refreshes.mode IS 'full, incremental, hot or months (ops.refreshes.mode).';

-- Every version of every transaction: the recorded ones, and each core row whose version is
-- not recorded (never changed: its first seen version, valid from the refresh that wrote it).
CREATE VIEW history.transaction_timeline AS
WITH unrecorded AS (
    SELECT t.* FROM core.transactions t
    WHERE NOT EXISTS (SELECT 1 FROM history.transaction_versions v
                      WHERE v.id = t.id AND v.valid_from_refresh = t.refresh_id)
), every AS (
    SELECT v.id, v.valid_from_refresh,
           coalesce(v.valid_to_refresh, u.refresh_id) AS valid_to_refresh,
           v.kind, v.changed_fields, v.origin, v.account_id, v.concept, v.amount, v.booked_at,
           v.month, v.type, v.category_id, v.expense_goal_id, v.created_at, v.updated_at
    FROM history.transaction_versions v
    LEFT JOIN unrecorded u ON u.id = v.id AND v.valid_to_refresh IS NULL
    UNION ALL
    SELECT u.id, u.refresh_id, NULL,
           CASE WHEN EXISTS (SELECT 1 FROM history.transaction_versions v WHERE v.id = u.id)
                THEN 'came back' ELSE 'first seen' END,
           NULL, 'service', u.account_id, u.concept, u.amount, u.booked_at, u.month, u.type,
           u.category_id, u.expense_goal_id, u.created_at, u.updated_at
    FROM unrecorded u
)
SELECT e.id, e.valid_from_refresh, e.valid_to_refresh,
       f.refresh_no AS valid_from_no, t.refresh_no AS valid_to_no,
       f.seen_at AS valid_from, t.seen_at AS valid_to,
       e.kind, e.changed_fields, e.origin, e.account_id, e.concept, e.amount, e.booked_at,
       e.month, e.type, e.category_id, e.expense_goal_id, e.created_at, e.updated_at
FROM every e
LEFT JOIN history.refreshes f ON f.refresh_id = e.valid_from_refresh
LEFT JOIN history.refreshes t ON t.refresh_id = e.valid_to_refresh;
COMMENT ON VIEW history.transaction_timeline IS 'Every version of every transaction, valid in [valid_from, valid_to): the versions refreshes changed (history.transaction_versions) and, for a row never changed, its core.transactions row as its first seen version. Deleted versions are rows the ledger did not hold in their interval.';
COMMENT ON COLUMN history.transaction_timeline.id IS 'The transaction (core.transactions.id).';
COMMENT ON COLUMN history.transaction_timeline.valid_from_refresh IS 'The refresh that first saw this version.';
COMMENT ON COLUMN history.transaction_timeline.valid_to_refresh IS 'The refresh that saw it replaced; NULL while current.';
COMMENT ON COLUMN history.transaction_timeline.valid_from_no IS 'valid_from_refresh''s number (history.refreshes.refresh_no).';
COMMENT ON COLUMN history.transaction_timeline.valid_to_no IS 'valid_to_refresh''s number; NULL while current.';
COMMENT ON COLUMN history.transaction_timeline.valid_from IS 'When this version was first seen (the service''s clock, UTC).';
COMMENT ON COLUMN history.transaction_timeline.valid_to IS 'When it was seen replaced; NULL while current.';
COMMENT ON COLUMN history.transaction_timeline.kind IS 'first seen, added, changed, deleted or came back (history.transaction_versions.kind).';
COMMENT ON COLUMN history.transaction_timeline.changed_fields IS 'For a changed version: the fields that differ from the one before.';
COMMENT ON COLUMN history.transaction_timeline.origin IS 'service, write-back or rule (history.transaction_versions.origin).';
COMMENT ON COLUMN history.transaction_timeline.account_id IS 'The version''s account.';
COMMENT ON COLUMN history.transaction_timeline.concept IS 'The version''s concept.';
COMMENT ON COLUMN history.transaction_timeline.amount IS 'The version''s amount in integer cents; negative is money out.';
COMMENT ON COLUMN history.transaction_timeline.booked_at IS 'The version''s date.';
COMMENT ON COLUMN history.transaction_timeline.month IS 'First day of booked_at''s month.';
COMMENT ON COLUMN history.transaction_timeline.type IS 'expense, income or transfer.';
COMMENT ON COLUMN history.transaction_timeline.category_id IS 'The version''s category (NULL: uncategorised).';
COMMENT ON COLUMN history.transaction_timeline.expense_goal_id IS 'The version''s Expense goal, if any.';
COMMENT ON COLUMN history.transaction_timeline.created_at IS 'When the service created the transaction.';
COMMENT ON COLUMN history.transaction_timeline.updated_at IS 'When the service last updated this version.';

-- The ledger as it stood: core.transactions' columns (refresh_id: the refresh that saw the
-- version), from `centsync sql`, Python or a notebook.
CREATE MACRO history.ledger_as_of(ts) AS TABLE
SELECT id, account_id, concept, amount, booked_at, month, type, category_id, expense_goal_id,
       created_at, updated_at, valid_from_refresh AS refresh_id
FROM history.transaction_timeline
WHERE kind <> 'deleted' AND valid_from <= ts::TIMESTAMPTZ
  AND (valid_to IS NULL OR valid_to > ts::TIMESTAMPTZ);

CREATE MACRO history.ledger_as_of_refresh(n) AS TABLE
SELECT id, account_id, concept, amount, booked_at, month, type, category_id, expense_goal_id,
       created_at, updated_at, valid_from_refresh AS refresh_id
FROM history.transaction_timeline
WHERE kind <> 'deleted' AND valid_from_no <= n AND (valid_to_no IS NULL OR valid_to_no > n);
COMMENT ON MACRO TABLE history.ledger_as_of IS 'The ledger as it stood at the moment ts (the service''s clock; a DATE is its midnight in the session''s time zone): core.transactions'' columns, refresh_id being the refresh that first saw each version. E.g. FROM history.ledger_as_of(TIMESTAMPTZ ''2026-11-01 00:00:00+00'').';
COMMENT ON MACRO TABLE history.ledger_as_of_refresh IS 'The ledger as it stood after refresh number n (history.refreshes.refresh_no, 1 for the first): core.transactions'' columns. E.g. FROM history.ledger_as_of_refresh(12).';
