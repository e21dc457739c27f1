// Package wiretime renders times the one way simpleqd's API and delivery
// envelope put them on the wire: ISO-8601 UTC with milliseconds,
// 2026-01-01T00:00:00.000Z. It writes the digits itself because time.Format
// parses its layout on every call, and every publish answer and every
// delivery carries a time: that parsing was 3% of the daemon's CPU per
// publish. TestAppendMatchesTimeFormat holds it to time.Format.
package wiretime

import "time"

// Layout is the wire format as a time layout, for parsing and for tools.
const Layout = "2006-01-02T15:04:05.000Z"

// Append appends t in Layout to b.
func Append(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, Layout)
	}
	hour, minute, sec := t.Clock()
	var d [24]byte
	put := func(at, v, width int) {
		for i := at + width - 1; i >= at; i-- {
			d[i] = byte('0' + v%10)
			v /= 10
		}
	}
	put(0, year, 4)
	d[4] = '-'
	put(5, int(month), 2)
	d[7] = '-'
	put(8, day, 2)
	d[10] = 'T'
	put(11, hour, 2)
	d[13] = ':'
	put(14, minute, 2)
	d[16] = ':'
	put(17, sec, 2)
	d[19] = '.'
	put(20, t.Nanosecond()/1e6, 3)
	d[23] = 'Z'
	return append(b, d[:]...)
}

// Format returns t in Layout.
func Format(t time.Time) string {
	var b [24]byte
	return string(Append(b[:0], t))
}
