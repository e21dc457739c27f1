// Package schedule turns schedules into jobs (runtime.md §4): Service is the
// write path (a new schedule's first tick on Redis' clock), Runner the
// daemon's scheduler that fires them. Every firing is one atomic script on
// the queue's slot (package store, lua/schedule.lua), which checks that the
// tick is still the schedule's next and due by Redis' clock, so whatever
// daemons run, crash or restart, each tick publishes exactly one job.
package schedule
