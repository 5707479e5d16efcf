# realmgate gateway on Node 24, which runs the TypeScript sources as they are (type stripping):
# no build step, no loader, no tsx. The image contains no Keycloak and no Java: set KEYCLOAK_URL
# to an external Keycloak (docker-compose.yml does). Outside demo mode KEYCLOAK_ADMIN_PASSWORD
# and KEYCLOAK_CLIENT_SECRET are required. test/unit/dockerfile.test.ts keeps this file in step
# with package.json and src/; the compose suite (npm run test:compose) builds and runs it.
# NODE_IMAGE: the upstream image by default; CI builds a stand-in of it (ops/images/).
ARG NODE_IMAGE=node:24-bookworm-slim
FROM ${NODE_IMAGE}

ENV NODE_ENV=production
WORKDIR /app

# Runtime dependencies only: every package src/ imports is in "dependencies" (the test checks).
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

COPY src/ ./src/
COPY keycloak/ ./keycloak/
COPY realm-export/ ./realm-export/

# DATA_DIR (default .data) must be writable by the unprivileged user.
RUN mkdir -p /app/.data && chown node:node /app/.data
USER node

EXPOSE 8000 8001

HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8000) + '/healthz', { signal: AbortSignal.timeout(4000) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]

CMD ["node", "src/main.ts"]
