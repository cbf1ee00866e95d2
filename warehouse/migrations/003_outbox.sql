-- The write-back outbox as of the last refresh: a copy of the outbox file
-- (centsync.outbox.duckdb beside this warehouse), which is the truth and is written in place.
CREATE TABLE ops.outbox (
    id               BIGINT PRIMARY KEY,
    idempotency_key  VARCHAR NOT NULL,
    body_sha256      VARCHAR NOT NULL,
    operation        VARCHAR NOT NULL,
    method           VARCHAR NOT NULL,
    path             VARCHAR NOT NULL,
    body             VARCHAR NOT NULL,
    state            VARCHAR NOT NULL,
    reason           VARCHAR,
    source           VARCHAR NOT NULL,
    source_name      VARCHAR NOT NULL,
    source_line      BIGINT,
    event_ref        VARCHAR NOT NULL,
    row_text         VARCHAR,
    account_id       UUID,
    booked_at        DATE,
    amount           BIGINT,
    concept          VARCHAR,
    transaction_id   UUID,
    server_id        UUID,
    response_status  INTEGER,
    response_body    VARCHAR,
    replayed         BOOLEAN,
    found_by_lookup  BOOLEAN NOT NULL,
    attempts         INTEGER NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL,
    first_sent_at    TIMESTAMPTZ,
    last_sent_at     TIMESTAMPTZ,
    last_response_at TIMESTAMPTZ,
    confirmed_at     TIMESTAMPTZ,
    confirmed_by     VARCHAR,
    updated_at       TIMESTAMPTZ NOT NULL
);
COMMENT ON TABLE ops.outbox IS 'Write-back requests (manual transactions, edits, Expense assignments) as of the last refresh: a copy of the outbox file beside the warehouse, which is the truth. One row per request; nothing is ever deleted.';
COMMENT ON COLUMN ops.outbox.id IS 'The request''s number in the outbox.';
COMMENT ON COLUMN ops.outbox.idempotency_key IS 'Idempotency-Key sent with every attempt: a UUIDv5 of (source, event, operation, body schema version), never random.';
COMMENT ON COLUMN ops.outbox.body_sha256 IS 'SHA-256 of the exact body (of the row as read, for a row the validator rejected).';
COMMENT ON COLUMN ops.outbox.operation IS 'create (POST /v1/transactions), edit (PATCH /v1/transactions/{id}) or assign (POST /v1/transactions/{id}/expense).';
COMMENT ON COLUMN ops.outbox.method IS 'HTTP method sent (empty for a row the validator rejected).';
COMMENT ON COLUMN ops.outbox.path IS 'Request path sent (empty for a row the validator rejected).';
COMMENT ON COLUMN ops.outbox.body IS 'The exact JSON body sent on every attempt; amounts in integer cents.';
COMMENT ON COLUMN ops.outbox.state IS 'pending (not yet accepted; a send may be in flight), sent (accepted by the service), confirmed (seen again in a refresh), rejected (reason recorded, nothing created), needs_attention (a person decides).';
COMMENT ON COLUMN ops.outbox.reason IS 'Why a row is rejected or needs attention (the validator''s or the service''s words), or the last unknown outcome of a pending row.';
COMMENT ON COLUMN ops.outbox.source IS 'inbox (a CSV file) or requests (a row of ops.outbox_requests in the outbox file).';
COMMENT ON COLUMN ops.outbox.source_name IS 'The inbox file''s name, or ops.outbox_requests.';
COMMENT ON COLUMN ops.outbox.source_line IS 'Line of the file (or request_no of the request row) the request came from.';
COMMENT ON COLUMN ops.outbox.event_ref IS 'The originating event: event:<event_id>, or content:<hash>#<occurrence> for a row without an event id.';
COMMENT ON COLUMN ops.outbox.row_text IS 'The source row as read, verbatim.';
COMMENT ON COLUMN ops.outbox.account_id IS 'Account of a create.';
COMMENT ON COLUMN ops.outbox.booked_at IS 'Date of a create (the account''s calendar day).';
COMMENT ON COLUMN ops.outbox.amount IS 'Amount of a create in integer cents; negative is money out.';
COMMENT ON COLUMN ops.outbox.concept IS 'Concept of a create.';
COMMENT ON COLUMN ops.outbox.transaction_id IS 'The transaction an edit or assign changes.';
COMMENT ON COLUMN ops.outbox.server_id IS 'The transaction''s id on the service once accepted.';
COMMENT ON COLUMN ops.outbox.response_status IS 'HTTP status of the last response.';
COMMENT ON COLUMN ops.outbox.response_body IS 'Body of the last response (the created or changed transaction, or the error).';
COMMENT ON COLUMN ops.outbox.replayed IS 'The service answered with Idempotent-Replayed: true (an earlier attempt had already been applied).';
COMMENT ON COLUMN ops.outbox.found_by_lookup IS 'Accepted as found on the service after its idempotency key had expired (24 hours), instead of being resent.';
COMMENT ON COLUMN ops.outbox.attempts IS 'Sends started (each with the same key and body).';
COMMENT ON COLUMN ops.outbox.created_at IS 'When the request was written to the outbox (UTC).';
COMMENT ON COLUMN ops.outbox.first_sent_at IS 'When the first send started (UTC).';
COMMENT ON COLUMN ops.outbox.last_sent_at IS 'When the last send started (UTC); later than last_response_at while the outcome is unknown.';
COMMENT ON COLUMN ops.outbox.last_response_at IS 'When the last outcome was recorded (UTC).';
COMMENT ON COLUMN ops.outbox.confirmed_at IS 'When a refresh saw the row on the service (UTC).';
COMMENT ON COLUMN ops.outbox.confirmed_by IS 'The refresh (ops.refreshes.refresh_id) that saw it.';
COMMENT ON COLUMN ops.outbox.updated_at IS 'Last change of this row (UTC).';
