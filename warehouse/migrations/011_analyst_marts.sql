-- 011: the analysts' own marts (transform/analyst_marts.py): recurring series, transfers paired,
-- Expenses drawn down, merchants' display names, and spending without own-account transfers.
-- Ours, not the service's: the reconciliation compares none of them, and the spending marts
-- keep the service's rule. Rebuilt whole, in the marts' transaction, by every refresh.

CREATE TABLE marts.merchant_names (
    merchant      VARCHAR NOT NULL,
    merchant_name VARCHAR NOT NULL
);
COMMENT ON TABLE marts.merchant_names IS 'The name a person reads for each merchant key (ours): store numbers, references, web suffixes and company forms dropped, feed variants grouped (mercadona 0412 valencia and mercadona -> Mercadona), the feeds'' abbreviations named (amzn mktp es -> Amazon), and the rules file''s [merchants] renames applied first (kept beside the warehouse by `centsync rules`: docs/analysts.md).';
COMMENT ON COLUMN marts.merchant_names.merchant IS 'The service''s merchant key (as in spending_by_month_merchant.merchant).';
COMMENT ON COLUMN marts.merchant_names.merchant_name IS 'Its display name.';

CREATE TABLE marts.recurring_series (
    series_id             VARCHAR NOT NULL,
    merchant              VARCHAR NOT NULL,
    merchant_name         VARCHAR NOT NULL,
    account_id            UUID NOT NULL,
    account_name          VARCHAR,
    type                  VARCHAR NOT NULL,
    cadence               VARCHAR NOT NULL,
    typical_amount_cents  BIGINT NOT NULL,
    last_amount_cents     BIGINT NOT NULL,
    occurrences           BIGINT NOT NULL,
    first_booked_at       DATE NOT NULL,
    last_booked_at        DATE NOT NULL,
    next_expected_on      DATE NOT NULL,
    status                VARCHAR NOT NULL,
    previous_amount_cents BIGINT,
    changed_on            DATE
);
COMMENT ON TABLE marts.recurring_series IS 'Payments and income that repeat on a cadence (ours: transform/recurring.py), one row a series: one merchant key, account, type and direction repeating weekly, monthly, quarterly or yearly, the day free to move a few days, the amount free to vary or step up, a missed occurrence tolerated; one-off purchases at the same merchant are not members. Transfers are not series (marts.transfer_pairs).';
COMMENT ON COLUMN marts.recurring_series.series_id IS 'The series: cadence:direction:first 8 characters of the account id:merchant key (stable from refresh to refresh).';
COMMENT ON COLUMN marts.recurring_series.merchant IS 'The service''s merchant key (as in spending_by_month_merchant.merchant).';
COMMENT ON COLUMN marts.recurring_series.merchant_name IS 'Its display name (marts.merchant_names).';
COMMENT ON COLUMN marts.recurring_series.account_id IS 'The account it is paid from or into (core.accounts.id).';
COMMENT ON COLUMN marts.recurring_series.account_name IS 'The account''s name.';
COMMENT ON COLUMN marts.recurring_series.type IS 'expense or income.';
COMMENT ON COLUMN marts.recurring_series.cadence IS 'weekly, monthly, quarterly or yearly.';
COMMENT ON COLUMN marts.recurring_series.typical_amount_cents IS 'The median amount of its occurrences, in cents; negative = money out.';
COMMENT ON COLUMN marts.recurring_series.last_amount_cents IS 'The amount of the last occurrence, in cents.';
COMMENT ON COLUMN marts.recurring_series.occurrences IS 'How many transactions the series holds (marts.recurring_transactions).';
COMMENT ON COLUMN marts.recurring_series.first_booked_at IS 'The first occurrence''s booking date.';
COMMENT ON COLUMN marts.recurring_series.last_booked_at IS 'The last occurrence''s booking date.';
COMMENT ON COLUMN marts.recurring_series.next_expected_on IS 'The last occurrence plus one cadence: when the next one is due.';
COMMENT ON COLUMN marts.recurring_series.status IS 'active, or ended: the next occurrence is overdue by more than about half a cadence (16 days for monthly) on the service''s today.';
COMMENT ON COLUMN marts.recurring_series.previous_amount_cents IS 'The amount before the last change of amount (a price rise, a varying bill); NULL if it never changed.';
COMMENT ON COLUMN marts.recurring_series.changed_on IS 'The booking date of the first occurrence at the new amount; NULL if it never changed.';

CREATE TABLE marts.recurring_transactions (
    transaction_id UUID NOT NULL,
    series_id      VARCHAR NOT NULL,
    booked_at      DATE NOT NULL,
    amount_cents   BIGINT NOT NULL
);
COMMENT ON TABLE marts.recurring_transactions IS 'Which transaction belongs to which recurring series (ours), one row a member; a transaction is in one series at most.';
COMMENT ON COLUMN marts.recurring_transactions.transaction_id IS 'The transaction (core.transactions.id).';
COMMENT ON COLUMN marts.recurring_transactions.series_id IS 'Its series (marts.recurring_series.series_id).';
COMMENT ON COLUMN marts.recurring_transactions.booked_at IS 'Its booking date.';
COMMENT ON COLUMN marts.recurring_transactions.amount_cents IS 'Its amount in cents; negative = money out.';

CREATE TABLE marts.transfer_pairs (
    out_transaction_id UUID NOT NULL,
    in_transaction_id  UUID NOT NULL,
    from_account_id    UUID NOT NULL,
    to_account_id      UUID NOT NULL,
    amount_cents       BIGINT NOT NULL,
    lag_days           BIGINT NOT NULL,
    booked_at          DATE NOT NULL,
    out_type           VARCHAR NOT NULL,
    in_type            VARCHAR NOT NULL
);
COMMENT ON TABLE marts.transfer_pairs IS 'The two legs of money moved between the owner''s own visible accounts (ours: transform/transfers.py): the same amount out of one account and into another, the incoming leg booked from 1 day before to 4 days after, at least one leg typed transfer; matched one to one, nearest in days first, never one leg in two pairs.';
COMMENT ON COLUMN marts.transfer_pairs.out_transaction_id IS 'The outgoing leg (core.transactions.id; its amount is negative).';
COMMENT ON COLUMN marts.transfer_pairs.in_transaction_id IS 'The incoming leg (its amount is positive).';
COMMENT ON COLUMN marts.transfer_pairs.from_account_id IS 'The account the money left.';
COMMENT ON COLUMN marts.transfer_pairs.to_account_id IS 'The account the money reached.';
COMMENT ON COLUMN marts.transfer_pairs.amount_cents IS 'The amount moved, in cents, positive.';
COMMENT ON COLUMN marts.transfer_pairs.lag_days IS 'Days from the outgoing leg''s booking date to the incoming one''s (negative: booked the day before).';
COMMENT ON COLUMN marts.transfer_pairs.booked_at IS 'The outgoing leg''s booking date.';
COMMENT ON COLUMN marts.transfer_pairs.out_type IS 'The outgoing leg''s type (transfer; expense when the feed typed it so).';
COMMENT ON COLUMN marts.transfer_pairs.in_type IS 'The incoming leg''s type (transfer; expense for a refund-shaped leg).';

CREATE TABLE marts.unpaired_transfers (
    transaction_id       UUID NOT NULL,
    account_id           UUID NOT NULL,
    booked_at            DATE NOT NULL,
    amount_cents         BIGINT NOT NULL,
    reason               VARCHAR NOT NULL,
    other_transaction_id UUID
);
COMMENT ON TABLE marts.unpaired_transfers IS 'Transfer legs left without a pair, with the reason, and the legs of card payments typed as an expense (ours).';
COMMENT ON COLUMN marts.unpaired_transfers.transaction_id IS 'The leg (core.transactions.id).';
COMMENT ON COLUMN marts.unpaired_transfers.account_id IS 'Its account.';
COMMENT ON COLUMN marts.unpaired_transfers.booked_at IS 'Its booking date.';
COMMENT ON COLUMN marts.unpaired_transfers.amount_cents IS 'Its amount in cents; negative = money out.';
COMMENT ON COLUMN marts.unpaired_transfers.reason IS 'no_matching_leg: no leg of the same amount in another visible account within the window (its other side is in an account the service does not show, or was never booked); ambiguous: two or more legs at the same distance; card_payment_typed_as_expense: a card payment whose outgoing leg is typed expense (the service counts it as spending).';
COMMENT ON COLUMN marts.unpaired_transfers.other_transaction_id IS 'For a card payment typed as an expense, its other leg; NULL otherwise.';

CREATE TABLE marts.expense_goals_by_month (
    expense_goal_id        UUID NOT NULL,
    month                  DATE NOT NULL,
    assigned_cents         BIGINT NOT NULL,
    transactions           BIGINT NOT NULL,
    running_assigned_cents BIGINT NOT NULL
);
COMMENT ON TABLE marts.expense_goals_by_month IS 'What each Expense (budget goal) has drawn, per month of booked_at, from the assignments the ledger holds (core.transactions.expense_goal_id, write-back''s own included once a refresh has read them). The API lists no Expenses: their names and budgets are not known here.';
COMMENT ON COLUMN marts.expense_goals_by_month.expense_goal_id IS 'The Expense (core.transactions.expense_goal_id).';
COMMENT ON COLUMN marts.expense_goals_by_month.month IS 'First day of the month of booked_at.';
COMMENT ON COLUMN marts.expense_goals_by_month.assigned_cents IS 'Sum of the assigned transactions'' amounts in the month, in cents; negative = money out.';
COMMENT ON COLUMN marts.expense_goals_by_month.transactions IS 'Number of assigned transactions in the month.';
COMMENT ON COLUMN marts.expense_goals_by_month.running_assigned_cents IS 'assigned_cents summed over this and every earlier month: how far the Expense has been drawn.';

CREATE VIEW marts.spending_without_transfers AS
WITH moved AS (
    SELECT out_transaction_id AS id FROM marts.transfer_pairs
    UNION ALL SELECT in_transaction_id FROM marts.transfer_pairs
    UNION ALL SELECT transaction_id FROM marts.unpaired_transfers
    WHERE reason = 'card_payment_typed_as_expense'
)
SELECT date_trunc('month', t.booked_at)::DATE AS month, t.category_id,
       coalesce(c.name, 'Uncategorized') AS category_name,
       sum(t.amount)::BIGINT AS amount_cents, count(*)::BIGINT AS transactions
FROM core.transactions t
LEFT JOIN core.categories c ON c.id = t.category_id
WHERE t.type = 'expense' AND t.id NOT IN (SELECT id FROM moved)
GROUP BY ALL;
COMMENT ON VIEW marts.spending_without_transfers IS 'Spending per month and category by our rule, not the service''s: the expense rows less the legs of paired transfers (marts.transfer_pairs) and of card payments typed as an expense (marts.unpaired_transfers). marts.spending_by_month_category keeps the service''s rule, which the reconciliation proves.';
COMMENT ON COLUMN marts.spending_without_transfers.month IS 'First day of the month of booked_at.';
COMMENT ON COLUMN marts.spending_without_transfers.category_id IS 'The category; NULL = uncategorised.';
COMMENT ON COLUMN marts.spending_without_transfers.category_name IS 'The category''s name (Uncategorized for NULL).';
COMMENT ON COLUMN marts.spending_without_transfers.amount_cents IS 'Sum of the amounts in cents; negative = money out.';
COMMENT ON COLUMN marts.spending_without_transfers.transactions IS 'Number of expense rows counted.';
