import { Router, type Response } from 'express';
import { z } from 'zod';
import type { Principal } from '../auth/principal.ts';
import { success } from '../envelope/envelope.ts';
import { AppError } from '../envelope/errors.ts';
import { tokenLifetimesPatchSchema } from '../keycloak/token-lifetimes.ts';
import type { ProvisioningService } from './provisioning.service.ts';
import { hasControlCharacters } from './user-input.ts';

/** One line of printable text, as names and labels are shown in lists and logs. */
const text = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .refine((value) => !hasControlCharacters(value), 'must not contain control characters');

const organizationBody = z.strictObject({ id: z.string(), name: text(255) });

const workspaceBody = z.strictObject({
  id: z.string(),
  name: text(255),
  description: z.string().max(4000).optional(),
  environments: z.array(text(255)).max(100).optional(),
});

const userFields = {
  username: z.string(),
  password: z.string(),
  otp_secret: z.string().optional(),
};
const masterUserBody = z.strictObject(userFields);
const organizationUserBody = z.strictObject({
  ...userFields,
  workspaces: z.array(z.string()).max(1000).optional(),
});

const operationBody = z.strictObject({
  operation_name: text(255),
  scheduled_date_for_execution: z.iso.datetime({ offset: true }).nullable().optional(),
  environment: text(255).nullable().optional(),
  remarks: z.string().max(4000).nullable().optional(),
});

/**
 * The administrators' provisioning API, mounted under `/api/platform` behind authentication
 * of a master-realm user. Bodies are JSON already parsed upstream; each is checked here for
 * its shape and by the service for its meaning.
 */
export function createProvisioningRouter(service: ProvisioningService): Router {
  const router = Router();

  router.post('/organizations', async (req, res) => {
    const body = parseBody(organizationBody, req.body);
    res.json(success(await service.createOrganization(body)));
  });

  router.post('/organizations/:org/workspaces', async (req, res) => {
    const body = parseBody(workspaceBody, req.body);
    res.json(success(await service.createWorkspace(req.params.org, body, actorOf(res))));
  });

  router.post('/users', async (req, res) => {
    const { otp_secret, ...body } = parseBody(masterUserBody, req.body);
    res.json(success(await service.createUser('master', { ...body, otpSecret: otp_secret })));
  });

  router.post('/organizations/:org/users', async (req, res) => {
    const { otp_secret, ...body } = parseBody(organizationUserBody, req.body);
    const user = await service.createUser(req.params.org, { ...body, otpSecret: otp_secret });
    res.json(success(user));
  });

  router.post('/organizations/:org/workspaces/:ws/operations', async (req, res) => {
    const body = parseBody(operationBody, req.body);
    const { org, ws } = req.params;
    res.json(success(await service.addOperation(org, ws, body, actorOf(res))));
  });

  router.get('/token-lifetimes', async (_req, res) => {
    res.json(success(await service.getTokenLifetimes('master')));
  });

  router.patch('/token-lifetimes', async (req, res) => {
    const patch = parseBody(tokenLifetimesPatchSchema, req.body);
    res.json(success(await service.setTokenLifetimes('master', patch)));
  });

  router.get('/organizations/:org/token-lifetimes', async (req, res) => {
    res.json(success(await service.getTokenLifetimes(req.params.org)));
  });

  router.patch('/organizations/:org/token-lifetimes', async (req, res) => {
    const patch = parseBody(tokenLifetimesPatchSchema, req.body);
    res.json(success(await service.setTokenLifetimes(req.params.org, patch)));
  });

  return router;
}

/** Validates a parsed JSON body; the first few problems become the 400 message. */
function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const message = parsed.error.issues
    .slice(0, 3)
    .map((issue) => `${issue.path.join('.') || 'body'}: ${issue.message}`)
    .join('; ');
  throw new AppError('badRequestBody', { message, data: null });
}

/** Who to record as creator; the auth middleware mounted in front of this router sets it. */
function actorOf(res: Response): string {
  return (res.locals.principal as Principal | undefined)?.username ?? '';
}
