# One image for every Gantry service (api, ingest, worker) and the CLI (`gantry`);
# docker-compose.yml picks the command. Two stages: the build stage has the compiler and
# every dependency; the image keeps the built JavaScript and production dependencies only.

FROM node:20-bookworm-slim AS build
RUN npm install -g pnpm@12
WORKDIR /src
COPY package.json pnpm-lock.yaml pnpm-workspace.yaml tsconfig.base.json tsconfig.build.json tsconfig.package.json ./
COPY scripts ./scripts
COPY packages ./packages
COPY services ./services
COPY db ./db
# Dev dependencies too (TypeScript); the install's prepare script builds, pnpm build
# makes sure of it (incremental: nothing to do when prepare built).
RUN pnpm install --frozen-lockfile
RUN pnpm build
# /app: manifests, dist/ and db/, then `pnpm install --prod --frozen-lockfile` there.
RUN node scripts/assemble-production.mjs /app

FROM node:20-bookworm-slim
ENV NODE_ENV=production GANTRY_DATA_DIR=/data
WORKDIR /app
# Owned by root, so the services cannot rewrite their own code.
COPY --from=build /app /app
RUN mkdir -p /data && chown node:node /data \
  && ln -s /app/services/cli/dist/main.js /usr/local/bin/gantry
USER node
EXPOSE 8080
# The API's readiness, asked with node (a slim image has no curl) on GANTRY_PORT (8080 by
# default); ingest and worker containers replace it with their /healthz (docker-compose.yml).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=6 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.GANTRY_PORT || 8080) + '/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# node directly (no pnpm in between), so SIGTERM reaches the service and it stops cleanly.
CMD ["node", "--enable-source-maps", "services/api/dist/main.js"]
