-- 005: the warehouse documents itself. A comment on every table and column an analyst sees
-- (meaning, units, sign convention), the schemas' descriptions in ops.schemas (DuckDB 2.0 has
-- no COMMENT ON SCHEMA), and views that make the common questions one line.
-- docs/data-dictionary.md is generated from these comments (`centsync docs`, `make docs`).

-- the schemas ---------------------------------------------------------------------------------

CREATE TABLE ops.schemas (
    schema_name VARCHAR PRIMARY KEY,
    position    INTEGER NOT NULL,
    comment     VARCHAR NOT NULL
);
COMMENT ON TABLE ops.schemas IS 'What each schema of the warehouse holds (DuckDB has no COMMENT ON SCHEMA, so the schemas are described here). The data dictionary lists the schemas in this order.';
COMMENT ON COLUMN ops.schemas.schema_name IS 'The schema.';
COMMENT ON COLUMN ops.schemas.position IS 'Where the schema comes in the data dictionary (the analysts'' schemas first).';
COMMENT ON COLUMN ops.schemas.comment IS 'What the schema holds.';
INSERT INTO ops.schemas VALUES
    ('marts', 1, 'What analysts query: the numbers people ask for, rebuilt whole by every refresh from core (pure Polars, validated with pandera) and proven against the service''s own aggregates. Money columns end in _cents and keep the service''s sign (negative = money out). Spending is every expense row, refunds (positive amounts) included; income and transfers excluded. Months are calendar months of booked_at, as the DATE of their first day.'),
    ('recon', 2, 'The proof: every number the service also computes, compared with ours to the cent and the count, with a verdict per run (docs/reconciliation.md).'),
    ('core', 3, 'The service''s current state, typed: what a refresh read, with edits and deletions applied (a re-read month is replaced as a whole).'),
    ('raw', 4, 'Every record as the service sent it (JSON, unknown fields included), kept in step with core, and the rows validation rejected.'),
    ('history', 5, 'One snapshot per refresh of the accounts, connections, sync status, settings and net worth; rows are only ever added.'),
    ('server', 6, 'The service''s own aggregates as each refresh fetched them: what the reconciliation compares our numbers with. Use the latest refresh_id for current figures.'),
    ('ops', 7, 'What each refresh did (requests, months re-read, fingerprints), the write-back outbox, and the warehouse''s own bookkeeping.');

-- core ----------------------------------------------------------------------------------------

COMMENT ON TABLE core.transactions IS 'One row per transaction the service currently has (hidden accounts'' transactions are never sent). A re-read month is replaced as a whole, so edits and deletions show up here. Fields the list endpoint does not send (such as notes) are in raw.transactions.raw only.';
COMMENT ON COLUMN core.transactions.id IS 'The transaction''s id (the service''s UUID).';
COMMENT ON COLUMN core.transactions.account_id IS 'The account it belongs to (core.accounts.id).';
COMMENT ON COLUMN core.transactions.concept IS 'Merchant or description, 1 to 200 characters.';
COMMENT ON COLUMN core.transactions.amount IS 'Amount in integer cents of the settings currency; negative = money out.';
COMMENT ON COLUMN core.transactions.booked_at IS 'Booking date, in the timezone of the service''s settings (core.settings.timezone).';
COMMENT ON COLUMN core.transactions.month IS 'First day of booked_at''s month: the unit a refresh re-reads and replaces.';
COMMENT ON COLUMN core.transactions.type IS 'expense, income or transfer.';
COMMENT ON COLUMN core.transactions.category_id IS 'The category (core.categories.id); NULL = uncategorised.';
COMMENT ON COLUMN core.transactions.expense_goal_id IS 'The Expense (budget goal) it is assigned to; NULL = unassigned.';
COMMENT ON COLUMN core.transactions.created_at IS 'When the service created it (UTC); NULL if the service did not send it.';
COMMENT ON COLUMN core.transactions.updated_at IS 'When the service last changed it (UTC); NULL if not sent.';
COMMENT ON COLUMN core.transactions.refresh_id IS 'The refresh that last read this row''s month (ops.refreshes.refresh_id).';

COMMENT ON TABLE core.accounts IS 'The accounts as of the last refresh (the whole list is replaced by every refresh).';
COMMENT ON COLUMN core.accounts.id IS 'The account''s id.';
COMMENT ON COLUMN core.accounts.name IS 'Display name.';
COMMENT ON COLUMN core.accounts.type IS 'depository, credit, investment, loan or unclassified.';
COMMENT ON COLUMN core.accounts.subtype IS 'For example checking, savings; NULL when not sent.';
COMMENT ON COLUMN core.accounts.currency IS 'ISO 4217 code; every account shares the settings currency.';
COMMENT ON COLUMN core.accounts.balance IS 'Current balance in integer cents; negative = money owed (credit cards, loans).';
COMMENT ON COLUMN core.accounts.connection_id IS 'The bank connection that feeds it (core.connections.id); NULL for a manual account or when not sent.';
COMMENT ON COLUMN core.accounts.institution IS 'Bank name.';
COMMENT ON COLUMN core.accounts.updated_at IS 'When the service last changed the account (UTC).';
COMMENT ON COLUMN core.accounts.refresh_id IS 'The refresh that wrote it.';

COMMENT ON TABLE core.connections IS 'Bank connections as of the last refresh.';
COMMENT ON COLUMN core.connections.id IS 'The connection''s id.';
COMMENT ON COLUMN core.connections.provider IS 'Provider id (for example bankfeed_eu), as the service names it.';
COMMENT ON COLUMN core.connections.institution IS 'Bank name.';
COMMENT ON COLUMN core.connections.status IS 'active, reauth_required or error.';
COMMENT ON COLUMN core.connections.last_synced_at IS 'End of the connection''s last bank sync (UTC).';
COMMENT ON COLUMN core.connections.account_ids IS 'The accounts this connection feeds (core.accounts.id).';
COMMENT ON COLUMN core.connections.refresh_id IS 'The refresh that wrote it.';

COMMENT ON TABLE core.sync_status IS 'Bank-sync status per connection, as of the last refresh.';
COMMENT ON COLUMN core.sync_status.connection_id IS 'The connection (core.connections.id).';
COMMENT ON COLUMN core.sync_status.provider IS 'Its provider.';
COMMENT ON COLUMN core.sync_status.status IS 'Sync status as the service reports it.';
COMMENT ON COLUMN core.sync_status.last_synced_at IS 'Last completed sync (UTC).';
COMMENT ON COLUMN core.sync_status.next_sync_at IS 'Next scheduled sync (UTC); it moves later when the provider''s manual-sync quota is used up.';
COMMENT ON COLUMN core.sync_status.refresh_id IS 'The refresh that wrote it.';

COMMENT ON TABLE core.settings IS 'One row: the service''s settings at the last refresh.';
COMMENT ON COLUMN core.settings.timezone IS 'IANA timezone; booked_at dates are in it. When it changes, every month is re-read.';
COMMENT ON COLUMN core.settings.currency IS 'ISO 4217 code of every amount.';
COMMENT ON COLUMN core.settings.locale IS 'For example es-ES.';
COMMENT ON COLUMN core.settings.week_start IS 'First day of the week.';
COMMENT ON COLUMN core.settings.refresh_id IS 'The refresh that wrote it.';

COMMENT ON TABLE core.categories IS 'Category names. The API has no category list: names are learned from the labels of the spending endpoint (group_by=category), so only categories that had spending in a window some refresh asked about are here. Uncategorised (a NULL category) is not a row.';
COMMENT ON COLUMN core.categories.id IS 'The category''s id (as in core.transactions.category_id).';
COMMENT ON COLUMN core.categories.name IS 'The latest label seen.';
COMMENT ON COLUMN core.categories.first_seen_refresh IS 'The refresh that first saw it.';
COMMENT ON COLUMN core.categories.last_seen_refresh IS 'The refresh that last saw it.';

-- raw -----------------------------------------------------------------------------------------

COMMENT ON TABLE raw.transactions IS 'One row per row of core.transactions with the payload as sent, replaced with it in the same transaction. id is unique because it is kept in step with core (no index, for load speed).';
COMMENT ON COLUMN raw.transactions.id IS 'The transaction''s id.';
COMMENT ON COLUMN raw.transactions.booked_at IS 'Its booking date (so a month replace finds its raw rows).';
COMMENT ON COLUMN raw.transactions.refresh_id IS 'The refresh that landed it.';
COMMENT ON COLUMN raw.transactions.raw IS 'The record exactly as sent (zstd-compressed JSON), unknown fields included; query it with raw->>''field''.';
COMMENT ON TABLE raw.accounts IS 'One row per row of core.accounts, with the payload as sent.';
COMMENT ON COLUMN raw.accounts.id IS 'The account''s id.';
COMMENT ON COLUMN raw.accounts.refresh_id IS 'The refresh that landed it.';
COMMENT ON COLUMN raw.accounts.raw IS 'The record exactly as sent (JSON).';
COMMENT ON TABLE raw.connections IS 'One row per row of core.connections, with the payload as sent.';
COMMENT ON COLUMN raw.connections.id IS 'The connection''s id.';
COMMENT ON COLUMN raw.connections.refresh_id IS 'The refresh that landed it.';
COMMENT ON COLUMN raw.connections.raw IS 'The record exactly as sent (JSON).';
COMMENT ON TABLE raw.sync_status IS 'One row per row of core.sync_status, with the payload as sent.';
COMMENT ON COLUMN raw.sync_status.connection_id IS 'The connection.';
COMMENT ON COLUMN raw.sync_status.refresh_id IS 'The refresh that landed it.';
COMMENT ON COLUMN raw.sync_status.raw IS 'The record exactly as sent (JSON).';
COMMENT ON TABLE raw.settings IS 'The settings payload as sent.';
COMMENT ON COLUMN raw.settings.refresh_id IS 'The refresh that landed it.';
COMMENT ON COLUMN raw.settings.raw IS 'The record exactly as sent (JSON).';

COMMENT ON TABLE raw.rejected_rows IS 'Rows that broke a validation rule; they are not in core (every received row is in core or here). Rows are only ever added; a refresh goes on when rows are rejected, and its asset check fails loudly.';
COMMENT ON COLUMN raw.rejected_rows.refresh_id IS 'The refresh that received it.';
COMMENT ON COLUMN raw.rejected_rows.entity IS 'transactions, accounts, connections, sync_status, settings, or the server table the aggregate was for (server.spending, ...).';
COMMENT ON COLUMN raw.rejected_rows.record IS 'The record as received (its raw payload); stored as a JSON string when it was not valid JSON.';
COMMENT ON COLUMN raw.rejected_rows.reason IS 'Every rule it broke, separated by "; ".';
COMMENT ON COLUMN raw.rejected_rows.rejected_at IS 'When it was rejected (UTC).';

-- history -------------------------------------------------------------------------------------

COMMENT ON TABLE history.accounts IS 'The accounts as each refresh saw them, one row per (refresh_id, id): balances over time.';
COMMENT ON COLUMN history.accounts.refresh_id IS 'The refresh that took the snapshot.';
COMMENT ON COLUMN history.accounts.snapshot_at IS 'When the snapshot was taken (UTC).';
COMMENT ON COLUMN history.accounts.id IS 'The account''s id.';
COMMENT ON COLUMN history.accounts.name IS 'Display name then.';
COMMENT ON COLUMN history.accounts.type IS 'depository, credit, investment, loan or unclassified.';
COMMENT ON COLUMN history.accounts.subtype IS 'For example checking, savings.';
COMMENT ON COLUMN history.accounts.currency IS 'ISO 4217 code.';
COMMENT ON COLUMN history.accounts.balance IS 'Balance then, in integer cents; negative = owed.';
COMMENT ON COLUMN history.accounts.connection_id IS 'The bank connection that fed it.';
COMMENT ON COLUMN history.accounts.institution IS 'Bank name.';
COMMENT ON COLUMN history.accounts.updated_at IS 'When the service had last changed the account (UTC).';

COMMENT ON TABLE history.net_worth IS 'Net worth as each refresh saw the accounts, computed locally, one row per refresh.';
COMMENT ON COLUMN history.net_worth.refresh_id IS 'The refresh.';
COMMENT ON COLUMN history.net_worth.snapshot_at IS 'When the snapshot was taken (UTC).';
COMMENT ON COLUMN history.net_worth.currency IS 'ISO 4217 code.';
COMMENT ON COLUMN history.net_worth.assets IS 'Sum of the positive balances, in cents.';
COMMENT ON COLUMN history.net_worth.liabilities IS 'Magnitude of the negative balances, in cents (a positive number).';
COMMENT ON COLUMN history.net_worth.net_worth IS 'assets - liabilities, in cents.';
COMMENT ON COLUMN history.net_worth.account_count IS 'Accounts counted.';

COMMENT ON TABLE history.connections IS 'The bank connections as each refresh saw them, one row per (refresh_id, id).';
COMMENT ON COLUMN history.connections.refresh_id IS 'The refresh that took the snapshot.';
COMMENT ON COLUMN history.connections.snapshot_at IS 'When the snapshot was taken (UTC).';
COMMENT ON COLUMN history.connections.id IS 'The connection''s id.';
COMMENT ON COLUMN history.connections.provider IS 'Provider id.';
COMMENT ON COLUMN history.connections.institution IS 'Bank name.';
COMMENT ON COLUMN history.connections.status IS 'active, reauth_required or error.';
COMMENT ON COLUMN history.connections.last_synced_at IS 'End of the last bank sync then (UTC).';
COMMENT ON COLUMN history.connections.account_ids IS 'The accounts it fed.';

COMMENT ON TABLE history.sync_status IS 'Bank-sync status as each refresh saw it, one row per (refresh_id, connection_id).';
COMMENT ON COLUMN history.sync_status.refresh_id IS 'The refresh that took the snapshot.';
COMMENT ON COLUMN history.sync_status.snapshot_at IS 'When the snapshot was taken (UTC).';
COMMENT ON COLUMN history.sync_status.connection_id IS 'The connection.';
COMMENT ON COLUMN history.sync_status.provider IS 'Its provider.';
COMMENT ON COLUMN history.sync_status.status IS 'Sync status then.';
COMMENT ON COLUMN history.sync_status.last_synced_at IS 'Last completed sync then (UTC).';
COMMENT ON COLUMN history.sync_status.next_sync_at IS 'Next scheduled sync then (UTC).';

COMMENT ON TABLE history.settings IS 'The settings as each refresh saw them (shows when the timezone changed).';
COMMENT ON COLUMN history.settings.refresh_id IS 'The refresh.';
COMMENT ON COLUMN history.settings.snapshot_at IS 'When the snapshot was taken (UTC).';
COMMENT ON COLUMN history.settings.timezone IS 'IANA timezone then.';
COMMENT ON COLUMN history.settings.currency IS 'ISO 4217 code then.';
COMMENT ON COLUMN history.settings.locale IS 'Locale then.';
COMMENT ON COLUMN history.settings.week_start IS 'First day of the week then.';

-- server --------------------------------------------------------------------------------------

COMMENT ON TABLE server.transactions_summary IS 'One row per GET /v1/transactions/summary call: the service''s count and sums per type.';
COMMENT ON COLUMN server.transactions_summary.refresh_id IS 'The refresh that asked.';
COMMENT ON COLUMN server.transactions_summary.fetched_at IS 'When (UTC).';
COMMENT ON COLUMN server.transactions_summary.scope IS 'all, year, month or window (several months).';
COMMENT ON COLUMN server.transactions_summary.from_date IS 'The from sent (inclusive); NULL when not sent.';
COMMENT ON COLUMN server.transactions_summary.to_date IS 'The to sent (inclusive); NULL when not sent.';
COMMENT ON COLUMN server.transactions_summary.params IS 'Any other filters sent (account_id, type, ...).';
COMMENT ON COLUMN server.transactions_summary.count IS 'Matching transactions.';
COMMENT ON COLUMN server.transactions_summary.income IS 'Sum of income amounts, in cents (positive).';
COMMENT ON COLUMN server.transactions_summary.expense IS 'Sum of expense amounts, in cents (negative = money out; refunds count positive).';
COMMENT ON COLUMN server.transactions_summary.transfer IS 'Sum of transfer amounts, in cents.';
COMMENT ON COLUMN server.transactions_summary.net IS 'Sum of every amount, in cents.';

COMMENT ON TABLE server.accounts_summary IS 'GET /v1/accounts/summary, one row per refresh.';
COMMENT ON COLUMN server.accounts_summary.refresh_id IS 'The refresh that asked.';
COMMENT ON COLUMN server.accounts_summary.fetched_at IS 'When (UTC).';
COMMENT ON COLUMN server.accounts_summary.currency IS 'ISO 4217 code.';
COMMENT ON COLUMN server.accounts_summary.assets IS 'Sum of the positive balances, in cents.';
COMMENT ON COLUMN server.accounts_summary.liabilities IS 'Magnitude of the negative balances, in cents (a positive number).';
COMMENT ON COLUMN server.accounts_summary.net_worth IS 'assets - liabilities, in cents.';
COMMENT ON COLUMN server.accounts_summary.count IS 'Accounts counted.';
COMMENT ON COLUMN server.accounts_summary.by_type IS 'Balance per account type (JSON), in cents; the same as server.accounts_summary_by_type.';

COMMENT ON TABLE server.accounts_summary_by_type IS 'The by_type of server.accounts_summary as rows.';
COMMENT ON COLUMN server.accounts_summary_by_type.refresh_id IS 'The refresh that asked.';
COMMENT ON COLUMN server.accounts_summary_by_type.type IS 'Account type.';
COMMENT ON COLUMN server.accounts_summary_by_type.balance IS 'Sum of that type''s balances, in cents; negative = owed.';

COMMENT ON TABLE server.net_worth IS 'GET /v1/analytics/net-worth, one row per refresh.';
COMMENT ON COLUMN server.net_worth.refresh_id IS 'The refresh that asked.';
COMMENT ON COLUMN server.net_worth.fetched_at IS 'When (UTC).';
COMMENT ON COLUMN server.net_worth.currency IS 'ISO 4217 code.';
COMMENT ON COLUMN server.net_worth.assets IS 'Assets in cents.';
COMMENT ON COLUMN server.net_worth.liabilities IS 'Liabilities in cents (a positive magnitude).';
COMMENT ON COLUMN server.net_worth.total IS 'assets - liabilities, in cents.';
COMMENT ON COLUMN server.net_worth.as_of IS 'The service''s timestamp for the figures.';

COMMENT ON TABLE server.spending_totals IS 'One row per GET /v1/analytics/spending call (any group_by): the service counts every expense row in the range, refunds included.';
COMMENT ON COLUMN server.spending_totals.refresh_id IS 'The refresh that asked.';
COMMENT ON COLUMN server.spending_totals.fetched_at IS 'When (UTC).';
COMMENT ON COLUMN server.spending_totals.group_by IS 'category, merchant or month.';
COMMENT ON COLUMN server.spending_totals.from_date IS 'The from sent (inclusive).';
COMMENT ON COLUMN server.spending_totals.to_date IS 'The to sent (inclusive).';
COMMENT ON COLUMN server.spending_totals.currency IS 'ISO 4217 code.';
COMMENT ON COLUMN server.spending_totals.total IS 'Total spending in cents (negative = money out).';
COMMENT ON COLUMN server.spending_totals.row_count IS 'Rows in the response''s data (server.spending).';

COMMENT ON TABLE server.spending IS 'The rows of each spending response, one per entry of its data.';
COMMENT ON COLUMN server.spending.refresh_id IS 'The refresh that asked.';
COMMENT ON COLUMN server.spending.group_by IS 'category, merchant or month (which call the row belongs to).';
COMMENT ON COLUMN server.spending.from_date IS 'The call''s from (inclusive).';
COMMENT ON COLUMN server.spending.to_date IS 'The call''s to (inclusive).';
COMMENT ON COLUMN server.spending.key IS 'Category UUID (NULL = uncategorised), the merchant key (trimmed, lower-case, single spaces) or YYYY-MM.';
COMMENT ON COLUMN server.spending.label IS 'Category name, merchant or YYYY-MM.';
COMMENT ON COLUMN server.spending.amount IS 'Sum of the amounts in cents (negative = spent).';
COMMENT ON COLUMN server.spending.count IS 'Number of transactions.';

-- ops -----------------------------------------------------------------------------------------

COMMENT ON TABLE ops.refreshes IS 'One row per refresh: when, how, what it landed and the requests it spent.';
COMMENT ON COLUMN ops.refreshes.refresh_id IS 'The refresh: text that sorts by time (20261121T190800Z-1a2b3c4d), or a Dagster run id.';
COMMENT ON COLUMN ops.refreshes.started_at IS 'When it started (UTC).';
COMMENT ON COLUMN ops.refreshes.finished_at IS 'When it ended (UTC); NULL while running.';
COMMENT ON COLUMN ops.refreshes.status IS 'running, succeeded, failed (the data are the previous refresh''s; error says why) or interrupted (killed or stopped; set by the next refresh).';
COMMENT ON COLUMN ops.refreshes.mode IS 'full (re-read everything) or incremental (fingerprints, then only what differs).';
COMMENT ON COLUMN ops.refreshes.rows_landed IS 'Rows it loaded (every entity).';
COMMENT ON COLUMN ops.refreshes.rows_changed IS 'Rows added, altered or removed in core.';
COMMENT ON COLUMN ops.refreshes.rows_rejected IS 'Distinct rows it sent to raw.rejected_rows.';
COMMENT ON COLUMN ops.refreshes.requests IS 'API requests spent per endpoint (JSON), e.g. {"GET /v1/transactions": 12}.';
COMMENT ON COLUMN ops.refreshes.requests_total IS 'Sum of requests.';
COMMENT ON COLUMN ops.refreshes.months_checked IS 'Months whose fingerprint was compared with the service''s.';
COMMENT ON COLUMN ops.refreshes.months_reread IS 'Months re-read and why (JSON list of month, reason, rows).';
COMMENT ON COLUMN ops.refreshes.error IS 'The error of a failed refresh; NULL otherwise.';

COMMENT ON TABLE ops.month_reads IS 'One row for every month a refresh re-read, and why; rows are only ever added.';
COMMENT ON COLUMN ops.month_reads.refresh_id IS 'The refresh.';
COMMENT ON COLUMN ops.month_reads.month IS 'First day of the month.';
COMMENT ON COLUMN ops.month_reads.reason IS 'Why it was re-read (hot window, fingerprint mismatch, full, timezone changed, ...).';
COMMENT ON COLUMN ops.month_reads.rows IS 'Rows that landed for it.';
COMMENT ON COLUMN ops.month_reads.read_at IS 'When (UTC).';

COMMENT ON TABLE ops.month_state IS 'One row per month: the service''s fingerprint of the month last seen, and when the month was last read (what lets a stopped first sync resume).';
COMMENT ON COLUMN ops.month_state.month IS 'First day of the month.';
COMMENT ON COLUMN ops.month_state.server_count IS 'The service''s transaction count for the month when last checked.';
COMMENT ON COLUMN ops.month_state.server_income IS 'The service''s income sum for the month, in cents.';
COMMENT ON COLUMN ops.month_state.server_expense IS 'The service''s expense sum for the month, in cents (negative = money out).';
COMMENT ON COLUMN ops.month_state.server_transfer IS 'The service''s transfer sum for the month, in cents.';
COMMENT ON COLUMN ops.month_state.server_net IS 'The service''s net sum for the month, in cents.';
COMMENT ON COLUMN ops.month_state.server_category_hash IS 'A digest of the service''s spending per category for the month (sees re-categorisation, which count and sums cannot).';
COMMENT ON COLUMN ops.month_state.checked_refresh IS 'The refresh that last fetched the fingerprint.';
COMMENT ON COLUMN ops.month_state.checked_at IS 'When the fingerprint was last fetched (UTC).';
COMMENT ON COLUMN ops.month_state.read_refresh IS 'The refresh that last re-read the month''s rows.';
COMMENT ON COLUMN ops.month_state.read_at IS 'When the month''s rows were last re-read (UTC).';
COMMENT ON COLUMN ops.month_state.read_reason IS 'Why they were re-read.';
COMMENT ON COLUMN ops.month_state.read_rows IS 'Rows landed for the month then.';
COMMENT ON COLUMN ops.month_state.read_timezone IS 'The settings timezone in force when it was read.';

COMMENT ON TABLE ops.meta IS 'Key/value state of the warehouse: its source binding (source.base_url, source.account_id, source.currency, source.timezone, source.bound_at) and the settings timezone at the last snapshot (timezone; a change makes the next refresh full).';
COMMENT ON COLUMN ops.meta.key IS 'The key.';
COMMENT ON COLUMN ops.meta.value IS 'Its value, as text.';
COMMENT ON COLUMN ops.meta.updated_at IS 'When it was last set (UTC).';

COMMENT ON TABLE ops.schema_version IS 'One row per migration applied to this warehouse.';
COMMENT ON COLUMN ops.schema_version.version IS 'The migration''s number (warehouse/migrations/NNN_name.sql).';
COMMENT ON COLUMN ops.schema_version.name IS 'The migration''s name.';
COMMENT ON COLUMN ops.schema_version.applied_at IS 'When it was applied (UTC).';

-- marts: the columns 002 left undocumented ------------------------------------------------------

COMMENT ON COLUMN marts.spending_by_month_merchant.month IS 'First day of the month of booked_at.';
COMMENT ON COLUMN marts.spending_by_month_merchant.transactions IS 'Number of expense rows.';
COMMENT ON COLUMN marts.cash_flow_by_month.month IS 'First day of the month of booked_at.';
COMMENT ON COLUMN marts.transactions_by_month_type.month IS 'First day of the month of booked_at.';
COMMENT ON COLUMN marts.transactions_by_month_type.type IS 'expense, income or transfer.';
COMMENT ON COLUMN marts.transactions_by_month_type.amount_cents IS 'Sum of the amounts in cents (negative = money out).';
COMMENT ON COLUMN marts.transactions_by_month_type.transactions IS 'Number of rows.';
COMMENT ON COLUMN marts.balance_daily.account_id IS 'The account (core.accounts.id).';
COMMENT ON COLUMN marts.balance_daily.account_name IS 'Its name, as in core.accounts.';
COMMENT ON COLUMN marts.balance_daily.account_type IS 'Its type: depository, credit, investment, loan or unclassified.';
COMMENT ON COLUMN marts.balance_daily.date IS 'Every day from the account''s first transaction to the service''s today (an account with no transaction has one row, today).';
COMMENT ON COLUMN marts.net_worth_daily.date IS 'The day (every day of the history, to the service''s today).';
COMMENT ON COLUMN marts.net_worth_daily.assets_cents IS 'Sum of the positive end-of-day balances, in cents.';
COMMENT ON COLUMN marts.net_worth_daily.liabilities_cents IS 'Magnitude of the negative end-of-day balances, in cents (a positive number).';
COMMENT ON COLUMN marts.net_worth_snapshots.refresh_id IS 'The refresh.';
COMMENT ON COLUMN marts.net_worth_snapshots.snapshot_at IS 'When the refresh read the accounts (UTC).';
COMMENT ON COLUMN marts.net_worth_snapshots.currency IS 'ISO 4217 code.';
COMMENT ON COLUMN marts.net_worth_snapshots.assets_cents IS 'Sum of the positive balances, in cents.';
COMMENT ON COLUMN marts.net_worth_snapshots.liabilities_cents IS 'Magnitude of the negative balances, in cents (a positive number).';
COMMENT ON COLUMN marts.net_worth_snapshots.net_worth_cents IS 'assets_cents - liabilities_cents.';
COMMENT ON COLUMN marts.net_worth_snapshots.account_count IS 'Accounts counted.';

-- recon: the columns 002 left undocumented ------------------------------------------------------

COMMENT ON COLUMN recon.runs.recon_id IS 'This reconciliation.';
COMMENT ON COLUMN recon.runs.refresh_id IS 'The refresh whose data (and, unless live, aggregates) it compared.';
COMMENT ON COLUMN recon.runs.ran_at IS 'When (UTC).';
COMMENT ON COLUMN recon.runs.source IS 'refresh (inside a refresh), offline (centsync reconcile: that refresh''s aggregates, no request) or live (--live: aggregates fetched then).';
COMMENT ON COLUMN recon.runs.verdict IS 'agree (everything matches), explained (every difference has a known cause) or differ.';
COMMENT ON COLUMN recon.runs.checked IS 'Comparisons made.';
COMMENT ON COLUMN recon.runs.agree IS 'Comparisons that agree to the cent and the count.';
COMMENT ON COLUMN recon.runs.explained IS 'Differences with a known cause.';
COMMENT ON COLUMN recon.runs.differ IS 'Differences nobody can explain.';
COMMENT ON COLUMN recon.runs.seconds IS 'How long it took, marts included, in seconds.';

COMMENT ON COLUMN recon.results.recon_id IS 'The reconciliation (recon.runs.recon_id).';
COMMENT ON COLUMN recon.results.refresh_id IS 'The refresh it compared.';
COMMENT ON COLUMN recon.results."check" IS 'What was compared: spending.month, spending.category, spending.merchant, transactions.income / .expense / .transfer / .net, accounts.assets / .liabilities / .net_worth / .by_type, net_worth.assets / .liabilities / .total.';
COMMENT ON COLUMN recon.results.scope IS 'The range and key compared: 2024-03 (a month), all/Groceries or 2024/Groceries (a range and a category or merchant), all, depository (an account type).';
COMMENT ON COLUMN recon.results.subject IS 'The compared key: category id, merchant key, month or type.';
COMMENT ON COLUMN recon.results.label IS 'The key''s name.';
COMMENT ON COLUMN recon.results.from_date IS 'Start of the service''s request range (inclusive); NULL for a whole-history figure.';
COMMENT ON COLUMN recon.results.to_date IS 'End of the service''s request range (inclusive).';
COMMENT ON COLUMN recon.results.local_cents IS 'Our number, in cents.';
COMMENT ON COLUMN recon.results.server_cents IS 'The service''s number, in cents.';
COMMENT ON COLUMN recon.results.difference_cents IS 'local_cents - server_cents.';
COMMENT ON COLUMN recon.results.local_count IS 'Our row count, where the service gives one.';
COMMENT ON COLUMN recon.results.server_count IS 'The service''s row count.';
COMMENT ON COLUMN recon.results.status IS 'agree, explained or differ.';
COMMENT ON COLUMN recon.results.explanation IS 'Why it differs, or what explains it.';

COMMENT ON COLUMN recon.row_differences.recon_id IS 'The reconciliation.';
COMMENT ON COLUMN recon.row_differences.entity IS 'transactions or accounts.';
COMMENT ON COLUMN recon.row_differences.id IS 'The row''s id.';
COMMENT ON COLUMN recon.row_differences.kind IS 'only_local, only_server (the service sent it; the local copy lacks it) or different.';
COMMENT ON COLUMN recon.row_differences.month IS 'First day of the row''s month (transactions).';
COMMENT ON COLUMN recon.row_differences.category_id IS 'The row''s category (transactions).';
COMMENT ON COLUMN recon.row_differences.fields IS 'The differing fields, comma-separated.';
COMMENT ON COLUMN recon.row_differences."local" IS 'Our version of the row (JSON).';
COMMENT ON COLUMN recon.row_differences.server IS 'The service''s version of the row (JSON).';
COMMENT ON COLUMN recon.row_differences.source IS 'received: the reference is what the service sent (raw.*).';

-- views: the common questions in one line -------------------------------------------------------

CREATE VIEW marts.spending_by_month AS
SELECT month, sum(amount_cents)::BIGINT AS amount_cents, sum(transactions)::BIGINT AS transactions
FROM marts.spending_by_month_category
GROUP BY month;
COMMENT ON VIEW marts.spending_by_month IS 'Spending per month, every category together (the service''s rule: expense rows, refunds included).';
COMMENT ON COLUMN marts.spending_by_month.month IS 'First day of the month of booked_at.';
COMMENT ON COLUMN marts.spending_by_month.amount_cents IS 'Sum of the expense amounts in cents; negative = money out.';
COMMENT ON COLUMN marts.spending_by_month.transactions IS 'Number of expense rows.';

CREATE VIEW marts.spending_last_12_months AS
WITH today AS (SELECT coalesce(max(date), current_date) AS d FROM marts.net_worth_daily)
SELECT s.category_id, s.category_name,
       sum(s.amount_cents)::BIGINT AS amount_cents,
       sum(s.transactions)::BIGINT AS transactions,
       min(s.month) AS first_month, max(s.month) AS last_month
FROM marts.spending_by_month_category s, today
WHERE s.month > date_trunc('month', today.d) - INTERVAL 12 MONTH
  AND s.month <= today.d
GROUP BY s.category_id, s.category_name;
COMMENT ON VIEW marts.spending_last_12_months IS 'Spending per category over the 12 calendar months ending with the service''s current month (its today is the last day of marts.net_worth_daily), the current month included.';
COMMENT ON COLUMN marts.spending_last_12_months.category_id IS 'The category; NULL = uncategorised.';
COMMENT ON COLUMN marts.spending_last_12_months.category_name IS 'The category''s name (Uncategorized for NULL).';
COMMENT ON COLUMN marts.spending_last_12_months.amount_cents IS 'Sum of the expense amounts in cents; negative = money out.';
COMMENT ON COLUMN marts.spending_last_12_months.transactions IS 'Number of expense rows.';
COMMENT ON COLUMN marts.spending_last_12_months.first_month IS 'The first month with spending in the category in the window.';
COMMENT ON COLUMN marts.spending_last_12_months.last_month IS 'The last month with spending in the category in the window.';

CREATE VIEW marts.accounts_current AS
SELECT a.id AS account_id, a.name AS account_name, a.type AS account_type, a.subtype,
       a.institution, a.currency, a.balance AS balance_cents,
       CASE WHEN a.balance < 0 THEN 'liability' ELSE 'asset' END AS side,
       c.status AS connection_status, c.last_synced_at, a.updated_at, a.refresh_id
FROM core.accounts a
LEFT JOIN core.connections c ON c.id = a.connection_id;
COMMENT ON VIEW marts.accounts_current IS 'Every account as of the last refresh, with its name, type, balance and whether it counts to assets or liabilities, and its bank connection''s status.';
COMMENT ON COLUMN marts.accounts_current.account_id IS 'The account (core.accounts.id).';
COMMENT ON COLUMN marts.accounts_current.account_name IS 'Display name.';
COMMENT ON COLUMN marts.accounts_current.account_type IS 'depository, credit, investment, loan or unclassified.';
COMMENT ON COLUMN marts.accounts_current.subtype IS 'For example checking, savings.';
COMMENT ON COLUMN marts.accounts_current.institution IS 'Bank name.';
COMMENT ON COLUMN marts.accounts_current.currency IS 'ISO 4217 code.';
COMMENT ON COLUMN marts.accounts_current.balance_cents IS 'Current balance in cents; negative = owed.';
COMMENT ON COLUMN marts.accounts_current.side IS 'asset (balance >= 0) or liability (balance < 0), as net worth counts it.';
COMMENT ON COLUMN marts.accounts_current.connection_status IS 'Its bank connection''s status (active, reauth_required, error); NULL for a manual account.';
COMMENT ON COLUMN marts.accounts_current.last_synced_at IS 'End of its connection''s last bank sync (UTC).';
COMMENT ON COLUMN marts.accounts_current.updated_at IS 'When the service last changed the account (UTC).';
COMMENT ON COLUMN marts.accounts_current.refresh_id IS 'The refresh that read it.';

CREATE VIEW recon.latest_run AS
SELECT * FROM recon.runs ORDER BY ran_at DESC, recon_id DESC LIMIT 1;
COMMENT ON VIEW recon.latest_run IS 'The latest reconciliation and its verdict (one row; none before the first refresh).';
COMMENT ON COLUMN recon.latest_run.recon_id IS 'This reconciliation.';
COMMENT ON COLUMN recon.latest_run.refresh_id IS 'The refresh whose data it compared.';
COMMENT ON COLUMN recon.latest_run.ran_at IS 'When (UTC).';
COMMENT ON COLUMN recon.latest_run.source IS 'refresh, offline or live.';
COMMENT ON COLUMN recon.latest_run.verdict IS 'agree, explained or differ.';
COMMENT ON COLUMN recon.latest_run.checked IS 'Comparisons made.';
COMMENT ON COLUMN recon.latest_run.agree IS 'Comparisons that agree.';
COMMENT ON COLUMN recon.latest_run.explained IS 'Differences with a known cause.';
COMMENT ON COLUMN recon.latest_run.differ IS 'Differences nobody can explain.';
COMMENT ON COLUMN recon.latest_run.seconds IS 'How long it took, in seconds.';

CREATE VIEW recon.latest_differences AS
SELECT r.* FROM recon.results r JOIN recon.latest_run l USING (recon_id)
WHERE r.status <> 'agree';
COMMENT ON VIEW recon.latest_differences IS 'The comparisons of the latest reconciliation that do not agree (explained or differ); empty when everything matches.';
COMMENT ON COLUMN recon.latest_differences.recon_id IS 'The reconciliation.';
COMMENT ON COLUMN recon.latest_differences.refresh_id IS 'The refresh it compared.';
COMMENT ON COLUMN recon.latest_differences."check" IS 'What was compared (spending.month, spending.category, ...; see recon.results).';
COMMENT ON COLUMN recon.latest_differences.scope IS 'The range and key compared.';
COMMENT ON COLUMN recon.latest_differences.subject IS 'The compared key.';
COMMENT ON COLUMN recon.latest_differences.label IS 'The key''s name.';
COMMENT ON COLUMN recon.latest_differences.from_date IS 'Start of the service''s request range.';
COMMENT ON COLUMN recon.latest_differences.to_date IS 'End of the service''s request range.';
COMMENT ON COLUMN recon.latest_differences.local_cents IS 'Our number, in cents.';
COMMENT ON COLUMN recon.latest_differences.server_cents IS 'The service''s number, in cents.';
COMMENT ON COLUMN recon.latest_differences.difference_cents IS 'local_cents - server_cents.';
COMMENT ON COLUMN recon.latest_differences.local_count IS 'Our row count.';
COMMENT ON COLUMN recon.latest_differences.server_count IS 'The service''s row count.';
COMMENT ON COLUMN recon.latest_differences.status IS 'explained or differ.';
COMMENT ON COLUMN recon.latest_differences.explanation IS 'Why it differs, or what explains it.';
