"""The read replica (DATABASE_REPLICA_URL): which reads may go to a streaming standby, the lag
guard that sends them back to the primary, read-your-writes after an operator's action, and the
system checks. Nothing here is active unless the `replica` database alias is configured."""
