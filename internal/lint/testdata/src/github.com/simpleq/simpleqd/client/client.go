package client

import _ "github.com/simpleq/simpleqd/internal/store" // want `the SDK knows nothing of the daemon`
