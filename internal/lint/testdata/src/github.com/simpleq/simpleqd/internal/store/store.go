package store

import (
	_ "net/http" // want `github.com/simpleq/simpleqd/internal/store may not import net/http: storage knows nothing of delivery or HTTP`
	_ "strings"
)
