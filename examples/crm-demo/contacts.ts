/**
 * The demo CRM's contacts. Numbers live here, on the integrator's server: the page only ever sees
 * contact references, and the service decides what the agent's browser may see of a number.
 */
export interface Contact {
  reference: string;
  name: string;
  company: string;
  number: string;
  note: string;
}

export const CONTACTS: Contact[] = [
  { reference: 'crm-1001', name: 'Jo Bloggs', company: 'Bloggs Ltd', number: '+442079460123', note: 'answers after 2 s of ringing' },
  { reference: 'crm-1002', name: 'Sam Rivera', company: 'Rivera & Co', number: '+12025550123', note: 'answers after 2 s of ringing' },
  { reference: 'crm-1003', name: 'Ana Busy', company: 'Always On Call Inc', number: '+12025550101', note: 'busy' },
  { reference: 'crm-1004', name: 'Nick Noanswer', company: 'Gone Fishing LLC', number: '+12025550102', note: 'never answers' },
  { reference: 'crm-1005', name: 'Fay Farend', company: 'Short Calls Ltd', number: '+12025550230', note: 'hangs up 30 s after answering' },
  { reference: 'crm-1006', name: 'Pierre Paris', company: 'Paris SARL', number: '+33142685300', note: 'France: not an allowed destination' },
];

export function findContact(reference: unknown): Contact | undefined {
  return CONTACTS.find((contact) => contact.reference === reference);
}
