-- +goose Up
-- The invoice list's customer_email filter compares LOWER(customer_email) (an address is matched
-- whatever its case), which an index of the column as stored does not serve: the search read all of a
-- merchant's invoices. The index is on the lowered address instead.
DROP INDEX invoices_email;
CREATE INDEX invoices_email ON invoices (merchant_id, LOWER(customer_email), id);

-- +goose Down
DROP INDEX invoices_email;
CREATE INDEX invoices_email ON invoices (merchant_id, customer_email, id);
