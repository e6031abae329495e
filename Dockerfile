# One image for every Gantry service; docker-compose.yml picks the command.
FROM node:20-bookworm-slim
ENV PNPM_HOME=/pnpm PATH=/pnpm:$PATH NODE_ENV=production
RUN npm install -g pnpm@12
WORKDIR /app
COPY package.json pnpm-lock.yaml pnpm-workspace.yaml tsconfig.base.json tsconfig.json ./
COPY packages ./packages
COPY services ./services
COPY db ./db
RUN pnpm install --frozen-lockfile --prod=false
RUN mkdir -p /data && chown node:node /data
USER node
EXPOSE 8080
CMD ["pnpm", "--filter", "@gantry/api", "start"]
