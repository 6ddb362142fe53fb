/** A user's wallet signing host requests: the same class `versus dev` registers its demo wallet with. */
export { HostWallet as Wallet } from '../../../src/push/dev-wallet.js';
