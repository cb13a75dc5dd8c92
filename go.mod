module github.com/distlock/locker

go 1.26.8
