package netguard

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// CheckURL is the write-time check of a webhook URL (a queue created or
// changed over the API): an absolute http:// or https:// URL whose host the
// policy allows (CheckHost). It refuses what parsers read differently,
// since the URL is parsed again by the HTTP client that delivers (fasthttp,
// not net/url): whitespace and control characters, backslashes, user
// information ("http://a@b/" has fooled many a check of the host, and a
// password in a URL would be shown and logged), and percent-escapes in the
// host. The error says what is wrong, for fieldErrors.webhookUrl.
//
// Passing CheckURL does not make a connection safe: the name can resolve
// elsewhere later. The Dialer is the connect-time check.
func (p *Policy) CheckURL(rawURL string) error {
	for _, r := range rawURL {
		if r <= ' ' || r == 0x7f || r == '\\' {
			return errors.New("must not contain whitespace, control characters or backslashes")
		}
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return errors.New("must be an absolute http:// or https:// URL")
	}
	if s := strings.ToLower(scheme); s != "http" && s != "https" {
		return fmt.Errorf("must use http or https (got %q)", scheme)
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	if strings.Contains(authority, "@") {
		return errors.New("must not contain user information (user@ or user:password@)")
	}
	if strings.Contains(authority, "%") {
		return errors.New("must not contain percent-escapes or zones in the host")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("is not a valid URL: %v", unwrapURLError(err))
	}
	if u.Opaque != "" || u.Host != authority {
		return errors.New("must be an absolute http:// or https:// URL with a host")
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return errors.New("must have a host")
	}
	if strings.HasSuffix(authority, ":") {
		return errors.New("has an empty port")
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return fmt.Errorf("has an invalid port %q", port)
		}
	}
	if strings.Contains(host, ":") != strings.HasPrefix(authority, "[") {
		return errors.New("must write an IPv6 address in brackets")
	}
	return p.CheckHost(host)
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
