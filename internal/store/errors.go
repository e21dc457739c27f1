package store

import (
	"errors"

	"github.com/redis/go-redis/v9"
)

func isNil(err error) bool { return errors.Is(err, redis.Nil) }
