-- 012: the current month is not a finished one (issue 44). Every monthly mart says which of its
-- months are still running: the service's current month (and any later one, of rows booked
-- ahead), whose figures are to date only; a month before its salary arrives reads as a loss.
-- Set by every rebuild of the marts from the service's today.
ALTER TABLE marts.spending_by_month_category ADD COLUMN partial BOOLEAN DEFAULT false;
ALTER TABLE marts.spending_by_month_merchant ADD COLUMN partial BOOLEAN DEFAULT false;
ALTER TABLE marts.cash_flow_by_month ADD COLUMN partial BOOLEAN DEFAULT false;
ALTER TABLE marts.transactions_by_month_type ADD COLUMN partial BOOLEAN DEFAULT false;
COMMENT ON COLUMN marts.spending_by_month_category.partial IS 'True for the service''s current month (and any later one): still running, its figures are to date, not a whole month''s.';
COMMENT ON COLUMN marts.spending_by_month_merchant.partial IS 'True for the service''s current month (and any later one): still running, its figures are to date, not a whole month''s.';
COMMENT ON COLUMN marts.cash_flow_by_month.partial IS 'True for the service''s current month (and any later one): still running, its figures are to date (income that has not arrived yet makes it look like a loss), not a whole month''s.';
COMMENT ON COLUMN marts.transactions_by_month_type.partial IS 'True for the service''s current month (and any later one): still running, its figures are to date, not a whole month''s.';

CREATE OR REPLACE VIEW marts.spending_by_month AS
SELECT month, sum(amount_cents)::BIGINT AS amount_cents, sum(transactions)::BIGINT AS transactions,
       bool_or(partial) AS partial
FROM marts.spending_by_month_category
GROUP BY month;
COMMENT ON VIEW marts.spending_by_month IS 'Spending per month, every category together (the service''s rule: expense rows, refunds included).';
COMMENT ON COLUMN marts.spending_by_month.month IS 'First day of the month of booked_at.';
COMMENT ON COLUMN marts.spending_by_month.amount_cents IS 'Sum of the expense amounts in cents; negative = money out.';
COMMENT ON COLUMN marts.spending_by_month.transactions IS 'Number of expense rows.';
COMMENT ON COLUMN marts.spending_by_month.partial IS 'True for the service''s current month (and any later one): still running, its spending is to date, not a whole month''s.';
