/** Connections of the gateway's PostgreSQL pool, per process: every request's, the writer's, the readiness check's. */
export const DATABASE_POOL_SIZE = 10;
