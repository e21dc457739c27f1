package store_test

import (
	_ "net/http"          //nolint:importrules // an exception that says why
	_ "net/http/httptest" // want `store may not import net/http/httptest`
)
