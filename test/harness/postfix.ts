import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import { SmtpTalk } from './smtp-talk.ts';

/**
 * Debian's Postfix as a real relay for tests, in an instance of its own: its own configuration
 * directory, queue and log under a temporary directory, `postfix -c DIR start-fg`, listening on a
 * loopback port. It takes mail for `localDomain` and delivers it locally, so an unknown user there
 * is refused by local(8) after the message was taken, and Postfix writes its own RFC 3464 DSN to
 * the envelope sender; mail for each of `routes` goes to a loopback port (ENS's inbound role). For
 * `strictDomain` it refuses every recipient at RCPT TO (550 5.1.1 "User unknown in virtual mailbox
 * table"). The machine's own Postfix (/etc/postfix) is neither started nor changed: running as
 * root, `postfix -c` takes a configuration directory without it being listed in
 * alternate_config_directories (that list gates the set-gid postdrop and postqueue, unused here).
 *
 * Resolves with the reason instead when Postfix is not installed or cannot run here (not root),
 * so the caller can skip saying why.
 */

export interface Postfix {
  port: number;
  /** Postfix's log so far (maillog_file). */
  log(): Promise<string>;
  /** Waits until the log has a line matching `re`; resolves with that line. */
  waitForLog(re: RegExp, timeoutMs?: number): Promise<string>;
  stop(): Promise<void>;
}

export interface PostfixOptions {
  port: number;
  localDomain: string;
  strictDomain: string;
  /** domain → loopback port its mail is relayed to. */
  routes: Record<string, number>;
  /** Offer STARTTLS to the routes' servers when they announce it (smtp_tls_security_level may). */
  tlsToRoutes?: boolean;
}

const POSTFIX = '/usr/sbin/postfix';

/** Why Postfix cannot run here, or null when it can. */
export function postfixUnavailable(): string | null {
  if (!existsSync(POSTFIX))
    return `Postfix is not installed (${POSTFIX} missing; .ci/run installs it: apt-get install postfix)`;
  if (userInfo().uid !== 0)
    return "Postfix's master must start as root, and this test does not run as root";
  const id = spawnSync('id', ['-u', 'postfix'], { encoding: 'utf8' });
  if (id.status !== 0) return 'there is no postfix user (the Debian package creates it)';
  return null;
}

export async function startPostfix(o: PostfixOptions): Promise<Postfix | string> {
  const unavailable = postfixUnavailable();
  if (unavailable) return unavailable;
  const root = await mkdtemp(path.join(tmpdir(), 'ens-postfix-'));
  // Postfix's daemons run as the postfix user: they must reach the configuration and the queue.
  await chmod(root, 0o755);
  const conf = path.join(root, 'conf');
  const queue = path.join(root, 'queue');
  const data = path.join(root, 'data');
  const maillog = path.join(root, 'maillog');
  await mkdir(conf, { mode: 0o755 });
  await mkdir(queue, { mode: 0o755 });
  await mkdir(data, { mode: 0o700 });
  const uid = Number(spawnSync('id', ['-u', 'postfix'], { encoding: 'utf8' }).stdout.trim());
  const gid = Number(spawnSync('id', ['-g', 'postfix'], { encoding: 'utf8' }).stdout.trim());
  await chown(data, uid, gid);
  const routes = Object.entries(o.routes)
    .map(([domain, port]) => `${domain}=smtp:[127.0.0.1]:${port}`)
    .join(' ');
  await writeFile(
    path.join(conf, 'main.cf'),
    [
      'compatibility_level = 3.6',
      `queue_directory = ${queue}`,
      `data_directory = ${data}`,
      `maillog_file_prefixes = ${root}`,
      `maillog_file = ${maillog}`,
      'myhostname = relay.ens-test.invalid',
      'mydomain = ens-test.invalid',
      'myorigin = $myhostname',
      'append_dot_mydomain = no',
      'smtpd_banner = $myhostname ESMTP',
      'biff = no',
      'inet_interfaces = 127.0.0.1',
      'inet_protocols = ipv4',
      'mynetworks = 127.0.0.0/8',
      'smtpd_relay_restrictions = permit_mynetworks, reject',
      `mydestination = ${o.localDomain}`,
      // Empty: smtpd takes any local recipient, and local(8) bounces the unknown ones afterwards.
      'local_recipient_maps =',
      'alias_maps =',
      'alias_database =',
      `virtual_mailbox_domains = ${o.strictDomain}`,
      `virtual_mailbox_maps = inline:{ {keeper@${o.strictDomain}=keeper/} }`,
      `transport_maps = inline:{ ${routes} }`,
      'smtp_dns_support_level = disabled',
      'smtp_host_lookup = native',
      `smtp_tls_security_level = ${o.tlsToRoutes ? 'may' : 'none'}`,
      'smtp_tls_loglevel = 1',
      'smtpd_tls_security_level = none',
      'queue_run_delay = 1s',
      'minimal_backoff_time = 1s',
      'maximal_backoff_time = 2s',
      '',
    ].join('\n'),
  );
  await writeFile(
    path.join(conf, 'master.cf'),
    [
      `127.0.0.1:${o.port} inet n - n - - smtpd`,
      'pickup unix n - n 60 1 pickup',
      'cleanup unix n - n - 0 cleanup',
      'qmgr unix n - n 300 1 qmgr',
      'tlsmgr unix - - n 1000? 1 tlsmgr',
      'rewrite unix - - n - - trivial-rewrite',
      'bounce unix - - n - 0 bounce',
      'defer unix - - n - 0 bounce',
      'trace unix - - n - 0 bounce',
      'verify unix - - n - 1 verify',
      'flush unix n - n 1000? 0 flush',
      'proxymap unix - - n - - proxymap',
      'smtp unix - - n - - smtp',
      'relay unix - - n - - smtp',
      'showq unix n - n - - showq',
      'error unix - - n - - error',
      'retry unix - - n - - error',
      'discard unix - - n - - discard',
      'local unix - n n - - local',
      'virtual unix - n n - - virtual',
      'anvil unix - - n - 1 anvil',
      'scache unix - - n - 1 scache',
      'postlog unix-dgram n - n - 1 postlogd',
      '',
    ].join('\n'),
  );

  const readLog = () => readFile(maillog, 'utf8').catch(() => '');
  // `check` creates the queue's directories with the owners and modes Postfix wants.
  const check = spawnSync(POSTFIX, ['-c', conf, 'check'], { encoding: 'utf8' });
  if (check.status !== 0) {
    const why = `postfix check failed (${check.status}): ${check.stderr}${(await readLog()).slice(-1500)}`;
    await rm(root, { recursive: true, force: true });
    return why;
  }
  let output = '';
  const master: ChildProcess = spawn(POSTFIX, ['-c', conf, 'start-fg'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  master.stdout!.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-4000)));
  master.stderr!.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) => master.once('exit', () => resolve()));

  const stop = async () => {
    if (master.exitCode === null && master.signalCode === null) {
      spawnSync(POSTFIX, ['-c', conf, 'stop'], { encoding: 'utf8' });
      const timer = setTimeout(() => master.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    await rm(root, { recursive: true, force: true });
  };

  // Ready once smtpd greets on the port.
  const until = Date.now() + 20_000;
  for (;;) {
    if (master.exitCode !== null) {
      const why = `postfix start-fg exited ${master.exitCode}: ${output}${(await readLog()).slice(-1500)}`;
      await stop();
      return why;
    }
    const talk = await SmtpTalk.open(o.port, { timeoutMs: 2_000 }).catch(() => null);
    if (talk) {
      const greeted = talk.greeting.code === 220;
      await talk.quit();
      if (greeted) break;
    }
    if (Date.now() > until) {
      const why = `postfix did not greet on 127.0.0.1:${o.port} within 20 s: ${output}${(await readLog()).slice(-1500)}`;
      await stop();
      return why;
    }
    await new Promise((r) => setTimeout(r, 200));
  }

  return {
    port: o.port,
    log: readLog,
    async waitForLog(re, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const line = (await readLog()).split('\n').find((l) => re.test(l));
        if (line) return line;
        if (Date.now() > deadline)
          throw new Error(
            `no Postfix log line matching ${re} within ${timeoutMs} ms:\n${(await readLog()).slice(-3000)}`,
          );
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    stop,
  };
}
