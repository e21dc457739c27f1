package dispatch

import (
	"strconv"
	"time"

	"go.uber.org/zap"
)

// ReleaseField renders a script's release time (milliseconds since the
// epoch on Redis' clock, as settle.lua and callback.lua report a defer) as
// the "until" log field, so a "queue held" line says when the hold this
// defer asked for ends. The queue holds until the latest release any defer
// asked for, which may be later. A value that is not a number gives "?".
func ReleaseField(ms string) zap.Field {
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return zap.String("until", "?")
	}
	return zap.Time("until", time.UnixMilli(n).UTC())
}
