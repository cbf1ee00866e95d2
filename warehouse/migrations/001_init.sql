-- 001: the warehouse's first shape. Money is BIGINT cents, dates DATE, ids UUID.
-- raw payloads use zstd: JSON compresses ~6x and loads faster than with the default FSST.
-- ops.schema_version is created by the migration runner itself (it records this file).

CREATE SCHEMA IF NOT EXISTS raw;
CREATE SCHEMA IF NOT EXISTS core;
CREATE SCHEMA IF NOT EXISTS history;
CREATE SCHEMA IF NOT EXISTS server;
CREATE SCHEMA IF NOT EXISTS ops;

-- core: the server's current state, typed ------------------------------------------------

CREATE TABLE core.transactions (
    id              UUID PRIMARY KEY,
    account_id      UUID NOT NULL,
    concept         VARCHAR NOT NULL,
    amount          BIGINT NOT NULL,
    booked_at       DATE NOT NULL,
    month           DATE NOT NULL,          -- first day of booked_at's month: the unit of replace
    type            VARCHAR NOT NULL,
    category_id     UUID,
    expense_goal_id UUID,
    created_at      TIMESTAMPTZ,
    updated_at      TIMESTAMPTZ,
    refresh_id      VARCHAR NOT NULL        -- the refresh that last read this row
);

CREATE TABLE core.accounts (
    id            UUID PRIMARY KEY,
    name          VARCHAR NOT NULL,
    type          VARCHAR NOT NULL,
    subtype       VARCHAR,
    currency      VARCHAR NOT NULL,
    balance       BIGINT NOT NULL,
    connection_id UUID,
    institution   VARCHAR,
    updated_at    TIMESTAMPTZ,
    refresh_id    VARCHAR NOT NULL
);

CREATE TABLE core.connections (
    id             UUID PRIMARY KEY,
    provider       VARCHAR NOT NULL,
    institution    VARCHAR,
    status         VARCHAR NOT NULL,
    last_synced_at TIMESTAMPTZ,
    account_ids    UUID[],
    refresh_id     VARCHAR NOT NULL
);

CREATE TABLE core.sync_status (
    connection_id  UUID PRIMARY KEY,
    provider       VARCHAR NOT NULL,
    status         VARCHAR NOT NULL,
    last_synced_at TIMESTAMPTZ,
    next_sync_at   TIMESTAMPTZ,
    refresh_id     VARCHAR NOT NULL
);

CREATE TABLE core.settings (               -- exactly one row once a refresh has run
    timezone   VARCHAR NOT NULL,
    currency   VARCHAR NOT NULL,
    locale     VARCHAR,
    week_start VARCHAR,
    refresh_id VARCHAR NOT NULL
);

CREATE TABLE core.categories (             -- the API has no category list: names come from spending labels
    id                 UUID PRIMARY KEY,
    name               VARCHAR NOT NULL,
    first_seen_refresh VARCHAR NOT NULL,
    last_seen_refresh  VARCHAR NOT NULL
);

-- raw: every landed record as the server sent it, unknown fields included -----------------

CREATE TABLE raw.transactions (             -- ids unique by construction: same delete set as core
    id         UUID NOT NULL,                   -- (no index: it would double the load time of 1M rows)
    booked_at  DATE NOT NULL,               -- kept so a month replace can find its raw rows
    refresh_id VARCHAR NOT NULL,
    raw        JSON NOT NULL USING COMPRESSION zstd
);
CREATE TABLE raw.accounts      (id UUID PRIMARY KEY, refresh_id VARCHAR NOT NULL, raw JSON NOT NULL USING COMPRESSION zstd);
CREATE TABLE raw.connections   (id UUID PRIMARY KEY, refresh_id VARCHAR NOT NULL, raw JSON NOT NULL USING COMPRESSION zstd);
CREATE TABLE raw.sync_status   (connection_id UUID PRIMARY KEY, refresh_id VARCHAR NOT NULL, raw JSON NOT NULL USING COMPRESSION zstd);
CREATE TABLE raw.settings      (refresh_id VARCHAR NOT NULL, raw JSON NOT NULL USING COMPRESSION zstd);

CREATE TABLE raw.rejected_rows (            -- append-only: a row that broke a validation rule
    refresh_id  VARCHAR NOT NULL,
    entity      VARCHAR NOT NULL,           -- transactions, accounts, connections, ...
    record      JSON USING COMPRESSION zstd, -- the record as received (its raw payload when known)
    reason      VARCHAR NOT NULL,
    rejected_at TIMESTAMPTZ NOT NULL
);

-- history: one row per refresh per entity, append-only -------------------------------------

CREATE TABLE history.accounts (
    refresh_id    VARCHAR NOT NULL,
    snapshot_at   TIMESTAMPTZ NOT NULL,
    id            UUID NOT NULL,
    name          VARCHAR NOT NULL,
    type          VARCHAR NOT NULL,
    subtype       VARCHAR,
    currency      VARCHAR NOT NULL,
    balance       BIGINT NOT NULL,
    connection_id UUID,
    institution   VARCHAR,
    updated_at    TIMESTAMPTZ,
    PRIMARY KEY (refresh_id, id)
);

CREATE TABLE history.net_worth (            -- computed locally from that refresh's accounts
    refresh_id    VARCHAR PRIMARY KEY,
    snapshot_at   TIMESTAMPTZ NOT NULL,
    currency      VARCHAR,
    assets        BIGINT NOT NULL,
    liabilities   BIGINT NOT NULL,          -- positive magnitude of negative balances
    net_worth     BIGINT NOT NULL,
    account_count BIGINT NOT NULL
);

CREATE TABLE history.connections (
    refresh_id     VARCHAR NOT NULL,
    snapshot_at    TIMESTAMPTZ NOT NULL,
    id             UUID NOT NULL,
    provider       VARCHAR NOT NULL,
    institution    VARCHAR,
    status         VARCHAR NOT NULL,
    last_synced_at TIMESTAMPTZ,
    account_ids    UUID[],
    PRIMARY KEY (refresh_id, id)
);

CREATE TABLE history.sync_status (
    refresh_id     VARCHAR NOT NULL,
    snapshot_at    TIMESTAMPTZ NOT NULL,
    connection_id  UUID NOT NULL,
    provider       VARCHAR NOT NULL,
    status         VARCHAR NOT NULL,
    last_synced_at TIMESTAMPTZ,
    next_sync_at   TIMESTAMPTZ,
    PRIMARY KEY (refresh_id, connection_id)
);

CREATE TABLE history.settings (
    refresh_id  VARCHAR PRIMARY KEY,
    snapshot_at TIMESTAMPTZ NOT NULL,
    timezone    VARCHAR NOT NULL,
    currency    VARCHAR NOT NULL,
    locale      VARCHAR,
    week_start  VARCHAR
);

-- server: the server's own aggregates as fetched, one set per refresh ----------------------

CREATE TABLE server.transactions_summary (
    refresh_id VARCHAR NOT NULL,
    fetched_at TIMESTAMPTZ NOT NULL,
    scope      VARCHAR NOT NULL,            -- 'all', 'year', 'month' or 'window'
    from_date  DATE,                        -- the request's from/to (NULL when not sent)
    to_date    DATE,
    params     JSON,                        -- any other filters sent (account_id, type, ...)
    count      BIGINT NOT NULL,
    income     BIGINT NOT NULL,
    expense    BIGINT NOT NULL,
    transfer   BIGINT NOT NULL,
    net        BIGINT NOT NULL
);

CREATE TABLE server.accounts_summary (
    refresh_id  VARCHAR PRIMARY KEY,
    fetched_at  TIMESTAMPTZ NOT NULL,
    currency    VARCHAR,
    assets      BIGINT NOT NULL,
    liabilities BIGINT NOT NULL,
    net_worth   BIGINT NOT NULL,
    count       BIGINT NOT NULL,
    by_type     JSON
);

CREATE TABLE server.accounts_summary_by_type (
    refresh_id VARCHAR NOT NULL,
    type       VARCHAR NOT NULL,
    balance    BIGINT NOT NULL,
    PRIMARY KEY (refresh_id, type)
);

CREATE TABLE server.net_worth (
    refresh_id  VARCHAR PRIMARY KEY,
    fetched_at  TIMESTAMPTZ NOT NULL,
    currency    VARCHAR,
    assets      BIGINT NOT NULL,
    liabilities BIGINT NOT NULL,
    total       BIGINT NOT NULL,
    as_of       TIMESTAMPTZ
);

CREATE TABLE server.spending_totals (       -- one row per spending request
    refresh_id VARCHAR NOT NULL,
    fetched_at TIMESTAMPTZ NOT NULL,
    group_by   VARCHAR NOT NULL,            -- 'category', 'merchant' or 'month'
    from_date  DATE NOT NULL,
    to_date    DATE NOT NULL,
    currency   VARCHAR,
    total      BIGINT NOT NULL,
    row_count  BIGINT NOT NULL
);

CREATE TABLE server.spending (              -- the rows of each spending response
    refresh_id VARCHAR NOT NULL,
    group_by   VARCHAR NOT NULL,
    from_date  DATE NOT NULL,
    to_date    DATE NOT NULL,
    key        VARCHAR,                     -- category uuid (NULL: uncategorized), merchant or YYYY-MM
    label      VARCHAR,
    amount     BIGINT NOT NULL,
    count      BIGINT NOT NULL
);

-- ops: what each refresh did --------------------------------------------------------------

CREATE TABLE ops.refreshes (
    refresh_id     VARCHAR PRIMARY KEY,
    started_at     TIMESTAMPTZ NOT NULL,
    finished_at    TIMESTAMPTZ,
    status         VARCHAR NOT NULL,        -- running, succeeded, failed, interrupted
    mode           VARCHAR NOT NULL,        -- full or incremental
    rows_landed    BIGINT NOT NULL DEFAULT 0,
    rows_changed   BIGINT NOT NULL DEFAULT 0,
    rows_rejected  BIGINT NOT NULL DEFAULT 0,
    requests       JSON,                    -- {"GET /v1/transactions": 12, ...}
    requests_total BIGINT,
    months_checked BIGINT,
    months_reread  JSON,                    -- [{"month": "2024-03", "reason": "...", "rows": n}, ...]
    error          VARCHAR
);

CREATE TABLE ops.month_reads (              -- append-only: every month a refresh re-read, and why
    refresh_id VARCHAR NOT NULL,
    month      DATE NOT NULL,
    reason     VARCHAR NOT NULL,
    rows       BIGINT NOT NULL,
    read_at    TIMESTAMPTZ NOT NULL
);

CREATE TABLE ops.month_state (              -- per month: the server's fingerprint last seen, last read
    month                 DATE PRIMARY KEY,
    server_count          BIGINT,
    server_income         BIGINT,
    server_expense        BIGINT,
    server_transfer       BIGINT,
    server_net            BIGINT,
    server_category_hash  VARCHAR,
    checked_refresh       VARCHAR,
    checked_at            TIMESTAMPTZ,
    read_refresh          VARCHAR,
    read_at               TIMESTAMPTZ,
    read_reason           VARCHAR,
    read_rows             BIGINT,
    read_timezone         VARCHAR
);

CREATE TABLE ops.meta (
    key        VARCHAR PRIMARY KEY,
    value      VARCHAR,
    updated_at TIMESTAMPTZ NOT NULL
);
