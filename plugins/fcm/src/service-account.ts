import { createPrivateKey } from 'node:crypto';
import { Compile } from 'typebox/compile';
import { GOOGLE_TOKEN_URI, ServiceAccountSchema, type ServiceAccount } from './config.ts';

/** A service account ready to sign with: every field present, the key checked. */
export interface Credentials {
  projectId: string;
  clientEmail: string;
  privateKeyId: string;
  privateKey: string;
  tokenUri: string;
}

const checkAccount = Compile(ServiceAccountSchema);

/**
 * Reads one service account from the configuration (an object, or its JSON text from an
 * environment variable) and refuses it at start-up, naming the setting, rather than at the first
 * send. Messages never include the key.
 */
export function readServiceAccount(raw: ServiceAccount | string, where: string): Credentials {
  let value: unknown = raw;
  if (typeof raw === 'string') {
    try {
      value = JSON.parse(raw);
    } catch (e) {
      throw new Error(
        `fcm: config ${where} is not a service-account JSON document (${(e as Error).message})`,
      );
    }
  }
  if (!checkAccount.Check(value)) {
    const first = (
      checkAccount.Errors(value) as readonly { instancePath: string; message: string }[]
    )[0];
    throw new Error(
      `fcm: config ${where}${first?.instancePath ?? ''} ${first?.message ?? 'is not a service-account key file'}`,
    );
  }
  const sa = value as ServiceAccount;
  const privateKey = normalisePem(sa.private_key);
  try {
    const key = createPrivateKey(privateKey);
    if (key.asymmetricKeyType !== 'rsa')
      throw new Error(`a ${String(key.asymmetricKeyType)} key, not RSA`);
  } catch (e) {
    throw new Error(
      `fcm: config ${where}/private_key is not a PEM RSA private key (${(e as Error).message})`,
    );
  }
  return {
    projectId: sa.project_id,
    clientEmail: sa.client_email,
    privateKeyId: sa.private_key_id,
    privateKey,
    tokenUri: sa.token_uri ?? GOOGLE_TOKEN_URI,
  };
}

/**
 * A key file passed through an environment variable or a YAML value often arrives with its line
 * breaks as the two characters "\n"; PEM parsing needs real ones.
 */
function normalisePem(pem: string): string {
  return pem.includes('\n') ? pem : pem.replace(/\\n/g, '\n');
}
