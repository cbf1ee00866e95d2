-- 004: rolling verification. Some edits change no aggregate the API offers (a date moved within
-- its month, a renamed income, amounts swapped within one merchant): every refresh re-reads the
-- months verified longest ago, so each month is re-read within a stated period
-- (docs/refresh.md, "Rolling verification"). The period is measured on the service's clock.
ALTER TABLE ops.month_state ADD COLUMN verified_at TIMESTAMPTZ;
UPDATE ops.month_state SET verified_at = read_at;
COMMENT ON COLUMN ops.month_state.verified_at IS
    'When this month was last read whole from the service (any reason: first sync, a differing fingerprint, the hot window, rolling verification), on the service''s clock (net worth as_of). The refresh re-reads months whose verified_at is older than the verification period.';
