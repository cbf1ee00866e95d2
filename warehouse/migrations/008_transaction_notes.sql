-- 008: notes people write stay beside their transaction (issue 29). The list endpoint never
-- sends `notes`, so core.transactions has none; the write-back's outbox holds every note it
-- posted (in the body it sent). This view shows the latest posted note of each transaction.
CREATE VIEW core.transaction_notes AS
WITH noted AS (
    SELECT coalesce(server_id, transaction_id) AS transaction_id,
           json_extract_string(body, '$.notes') AS notes,
           id AS outbox_id, source_name, operation,
           coalesce(last_response_at, updated_at) AS noted_at
    FROM ops.outbox
    WHERE state IN ('sent', 'confirmed') AND body <> '' AND json_exists(body, '$.notes')
    QUALIFY row_number() OVER (
        PARTITION BY coalesce(server_id, transaction_id) ORDER BY id DESC) = 1
)
SELECT t.id AS transaction_id, t.account_id, t.booked_at, t.amount, t.concept, n.notes,
       n.operation, n.source_name, n.outbox_id, n.noted_at
FROM core.transactions t
JOIN noted n ON n.transaction_id = t.id;
COMMENT ON VIEW core.transaction_notes IS 'Notes posted by the write-back (an inbox file''s notes column, an edit, a rule), beside their transaction: the latest note the service accepted for each. The API''s list never returns notes, so they are kept with the outbox and shown here.';
COMMENT ON COLUMN core.transaction_notes.transaction_id IS 'The transaction (core.transactions.id).';
COMMENT ON COLUMN core.transaction_notes.account_id IS 'Its account (core.accounts.id).';
COMMENT ON COLUMN core.transaction_notes.booked_at IS 'Its date.';
COMMENT ON COLUMN core.transaction_notes.amount IS 'Its amount in integer cents; negative is money out.';
COMMENT ON COLUMN core.transaction_notes.concept IS 'Its concept, as the service holds it now.';
COMMENT ON COLUMN core.transaction_notes.notes IS 'The latest note the write-back posted for it (verbatim, line breaks kept).';
COMMENT ON COLUMN core.transaction_notes.operation IS 'The request that posted the note: create or edit.';
COMMENT ON COLUMN core.transaction_notes.source_name IS 'Where the note came from: the inbox file, ops.outbox_requests, a rules file or a bank file.';
COMMENT ON COLUMN core.transaction_notes.outbox_id IS 'The request in ops.outbox that posted it.';
COMMENT ON COLUMN core.transaction_notes.noted_at IS 'When the service accepted it (UTC).';
