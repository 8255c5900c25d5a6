package processortest

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/simulator"
)

// Journal is a kind of processor ("journal") for tests of what goes where: its accounts decide as the
// simulator does, and it writes down which account was asked for what. An account's configuration
// is {"name": …, "test": …}.
type Journal struct {
	mu    sync.Mutex
	calls []string // "<account name> <operation>"
}

type journalConfig struct {
	Name string `json:"name"`
	Test bool   `json:"test"`
}

// Name is "journal".
func (j *Journal) Name() string { return "journal" }

// Parse reads {"name": …, "test": …}.
func (j *Journal) Parse(config []byte) (processor.Settings, error) {
	var c journalConfig
	err := json.Unmarshal(config, &c)
	return processor.Settings{Test: c.Test, Fields: map[string]string{"name": c.Name}}, err
}

// Open returns the account's processor.
func (j *Journal) Open(config []byte) (processor.Processor, error) {
	var c journalConfig
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, err
	}
	return &journaled{Processor: simulator.New(simulator.Config{}), name: c.Name, j: j}, nil
}

// Asked lists what the accounts were asked, in order: "<account name> <operation>", the operation
// one of sale, authorize, capture, refund, void.
func (j *Journal) Asked() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.calls...)
}

type journaled struct {
	processor.Processor
	name string
	j    *Journal
}

func (p *journaled) note(op string) {
	p.j.mu.Lock()
	p.j.calls = append(p.j.calls, p.name+" "+op)
	p.j.mu.Unlock()
}

func (p *journaled) Authorize(ctx context.Context, pay processor.Payment) (processor.Result, error) {
	p.note(map[bool]string{true: "sale", false: "authorize"}[pay.Capture])
	return p.Processor.Authorize(ctx, pay)
}

func (p *journaled) Capture(ctx context.Context, f processor.FollowUp) (processor.Result, error) {
	p.note("capture")
	return p.Processor.Capture(ctx, f)
}

func (p *journaled) Refund(ctx context.Context, f processor.FollowUp) (processor.Result, error) {
	p.note("refund")
	return p.Processor.Refund(ctx, f)
}

func (p *journaled) Void(ctx context.Context, f processor.FollowUp) (processor.Result, error) {
	p.note("void")
	return p.Processor.Void(ctx, f)
}
