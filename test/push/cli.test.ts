import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runVersus } from '../helpers/processes.js';
import { PushWorld } from './support/env.js';

/** The operator commands of notifications, run as an operator would, and their effect on the API. */
let world: PushWorld;

beforeAll(async () => {
  world = await PushWorld.start();
});
afterAll(async () => {
  await world?.stop();
});

const versus = (args: string[]) => runVersus(args, world.env);

/** Drops the API's 2-second cached copy of an app record, as if the cache time had passed. */
async function apiSeesChanges(origin: string): Promise<void> {
  await world.harness.server.services.registry.fetch(origin);
}

describe('versus apps mute / apps audience', () => {
  it('apps mute answers push_muted until apps mute --off', async () => {
    const app = await world.harness.registerApp();
    const { wallet } = await world.user(app);
    const send = () => world.send(app, { to: wallet.address, title: 't', body: 'b' });
    expect(await versus(['apps', 'mute', app.origin])).toEqual({ code: 0, stdout: `muted ${app.origin}\n`, stderr: '' });
    expect((await world.harness.registry.fetch(app.origin))!.pushMuted).toBe(true);
    await apiSeesChanges(app.origin);
    expect(await send()).toEqual({ status: 403, body: { error: 'push_muted' } });
    expect(await versus(['apps', 'mute', app.origin, '--off'])).toMatchObject({ code: 0, stdout: `unmuted ${app.origin}\n` });
    await apiSeesChanges(app.origin);
    expect((await send()).status).toBe(202);
  });

  it('apps audience configures the broadcast audience and the user window', async () => {
    const app = await world.harness.registerApp({ audienceDays: null });
    expect(await world.send(app, { title: 't', body: 'b' }, { broadcast: true })).toEqual({ status: 409, body: { error: 'broadcast_not_configured' } });
    const set = await versus(['apps', 'audience', app.origin, '--recent-days', '14']);
    expect(set).toEqual({ code: 0, stdout: `${app.origin}: broadcast audience 14 days, user window 90 days\n`, stderr: '' });
    await apiSeesChanges(app.origin);
    expect((await world.send(app, { title: 't', body: 'b' }, { broadcast: true })).status).toBe(202);
    expect((await versus(['apps', 'audience', app.origin, '--recent-days', '7', '--user-days', '30'])).stdout).toBe(`${app.origin}: broadcast audience 7 days, user window 30 days\n`);
    expect(await world.harness.registry.fetch(app.origin)).toMatchObject({ audienceDays: 7, userDays: 30 });
  });

  it('refuses with one line and exit 1: unknown app, missing or bad day counts', async () => {
    const app = await world.harness.registerApp();
    for (const [args, message] of [
      [['apps', 'mute', 'https://nobody.example'], 'versus: no app https://nobody.example\n'],
      [['apps', 'audience', app.origin], 'versus: --recent-days must be a whole number of days from 1 to 365\n'],
      [['apps', 'audience', app.origin, '--recent-days', '0'], 'versus: --recent-days must be a whole number of days from 1 to 365\n'],
      [['apps', 'audience', app.origin, '--recent-days', '3', '--user-days', '366'], 'versus: --user-days must be a whole number of days from 1 to 365\n'],
    ] as const) {
      expect(await versus([...args]), args.join(' ')).toEqual({ code: 1, stdout: '', stderr: message });
    }
    expect(await world.harness.registry.fetch(app.origin)).toMatchObject({ pushMuted: false, audienceDays: null });
  });
});
