package redis

// CloseClients is the option Open gives its Lockers, for tests that make
// their own clients and want Close to close them.
var CloseClients = closeClients
