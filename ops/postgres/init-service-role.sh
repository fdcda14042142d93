#!/usr/bin/env bash
# Run once by the postgres image on an empty data directory (/docker-entrypoint-initdb.d): creates
# `paceline`, the role the app connects as. It owns the `paceline` database and its `public`
# schema, so migrations run as it, and it is no superuser (docs/security.md "Least privilege"). The password
# comes from PACELINE_DB_PASSWORD, which psql reads itself (\getenv): it is never on a command line.
set -euo pipefail
: "${PACELINE_DB_PASSWORD:?set PACELINE_DB_PASSWORD}"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<'SQL'
\getenv password PACELINE_DB_PASSWORD
CREATE ROLE paceline WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD :'password';
ALTER DATABASE paceline OWNER TO paceline;
ALTER SCHEMA public OWNER TO paceline;
SQL
