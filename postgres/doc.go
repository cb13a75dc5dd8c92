// Package postgres is the PostgreSQL backend of locker.
package postgres
