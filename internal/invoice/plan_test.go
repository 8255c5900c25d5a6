package invoice

import (
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// The billing engine finds the invoices it has something to do for through invoices_next_check, which
// holds only those (migration 00046), never by reading the table: every invoice a merchant ever sent
// stays in it. The same for the claim of one invoice, by its primary key.
func TestDueQueriesUseTheirIndexes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		now := time.Now().UnixMilli()
		for _, c := range []struct {
			name, stmt string
			args       []any
			want       string
		}{
			{"find due invoices", dueSQL, []any{now, -1, 0, dueBatch}, "invoices_next_check"},
			{"read a due invoice", `SELECT ` + columns + ` FROM invoices WHERE id = $1 AND next_check <= $2`, []any{1, now}, ""},
		} {
			plan := storetest.PlanAsIfLarge(t, db, c.stmt, c.args...)
			if storetest.FullScan(plan, "invoices") || !strings.Contains(plan, c.want) {
				t.Errorf("%s: want %q in the plan, without reading the table:\n%s", c.name, c.want, plan)
			}
		}
	})
}
