package accounts

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"

	"github.com/kassapay/kassa/internal/processor"
)

// simulatorKind is the built-in simulator as a kind: it takes no configuration ({} or none), and
// nothing it takes moves money, so it is a test account: a transaction the simulator takes has
// test_mode true. It lives here rather than in package simulator because it is
// not a kind like the others: no account of it is stored, and its processor is the server's one
// simulator (Config.Simulator), whatever a configuration could say.
type simulatorKind struct{ simulator processor.Processor }

func (simulatorKind) Name() string { return SimulatorKind }

func (simulatorKind) Parse(config []byte) (processor.Settings, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(config, &fields); err != nil || fields == nil {
		return processor.Settings{}, errors.New("it must be a JSON object")
	}
	if len(fields) > 0 {
		return processor.Settings{}, errors.New("the simulator takes no configuration; unknown field " + slices.Sorted(maps.Keys(fields))[0])
	}
	return processor.Settings{Test: true}, nil
}

func (k simulatorKind) Open([]byte) (processor.Processor, error) { return k.simulator, nil }
